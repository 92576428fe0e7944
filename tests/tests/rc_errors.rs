//! The software NAA refuses a misbehaving client's message with the RC error a real queue pair
//! would give (NAK → the client's completion status), although its worker drops the
//! connection right after the error. Repeated many times: the NAK used to race the teardown.

use std::time::{Duration, Instant};

use naaice::Buffer;
use naaice::core::config::MRSP_RECV_LEN;
use naaice::swnaa::{SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::transport::{
    Completion, Endpoint, MemoryRegion, RemoteAddr, SendOp, SendWr, Sge, Transport, WcStatus,
};
use naaice_tests::{connect_within, start_naa};

const ROUNDS: usize = 200;
const LONG: Duration = Duration::from_secs(20);

/// Connects a raw endpoint to `naa`, posts `op` with `len` bytes from a fresh region and
/// returns the status of its completion.
fn refused(naa: &SoftNaaHandle, op: SendOp, len: usize) -> WcStatus {
    let deadline = Instant::now() + LONG;
    // The slot of the previous round may not be free yet: rejected, the client tries again.
    let mut ep: SoftEndpoint = loop {
        match SoftTransport::default().connect(naa.local_addr(), None, deadline) {
            Ok(ep) => break ep,
            Err(e) => {
                assert!(Instant::now() < deadline, "not served: {e}");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    let buf = Buffer::zeroed(len);
    let mr = ep.register(&buf).unwrap();
    let local = Sge {
        addr: mr.addr(),
        len: len as u32,
        lkey: mr.lkey(),
    };
    ep.post_send(&[SendWr::new(7, op, Some(local))]).unwrap();
    let mut wc = [Completion::BLANK];
    loop {
        if ep.poll(&mut wc).unwrap() == 1 {
            assert_eq!(wc[0].wr_id, 7);
            return wc[0].status;
        }
        match ep.wait_sleeping(deadline) {
            Ok(true) => {}
            Ok(false) => panic!("no completion within {LONG:?}"),
            // Torn down: the completion is ready (every request completes).
            Err(_) => {}
        }
    }
}

/// Runs `ROUNDS` refusals against one NAA with a single slot, then a normal client.
fn refusals(op: SendOp, len: usize, want: WcStatus) {
    let naa = start_naa(SoftNaaConfig {
        max_connections: 1,
        ..SoftNaaConfig::default()
    });
    for round in 0..ROUNDS {
        let got = refused(&naa, op, len);
        assert_eq!(got, want, "round {round}");
    }
    // The last round's slot may not be free yet either: rejected, the client tries again.
    let mut conn = connect_within(naa.local_addr(), LONG, "connect after the refusals");
    let buf = Buffer::from_slice(&[1, 2, 3]);
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.set_output(id).unwrap();
    conn.do_mrsp().unwrap();
    assert!(conn.do_transfer().unwrap().status.is_success());
    assert_eq!(buf.to_vec(), [2, 3, 4]);
}

#[test]
fn write_with_a_wrong_rkey_gets_remote_access() {
    // No region is advertised before the MRSP: any rkey is wrong.
    let target = RemoteAddr {
        addr: 0x1000,
        rkey: 0x5a5a,
    };
    refusals(SendOp::Write(target), 64, WcStatus::RemoteAccess);
}

#[test]
fn send_larger_than_the_posted_receive_gets_remote_invalid_request() {
    refusals(
        SendOp::Send,
        MRSP_RECV_LEN + 1,
        WcStatus::RemoteInvalidRequest,
    );
}
