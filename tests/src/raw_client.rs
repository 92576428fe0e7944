//! A raw software-transport client that sends an MRSP request of the test's choosing (any
//! bytes) and reports what the NAA answered: the hostile-peer side of the MRSP.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use naaice::Buffer;
use naaice::transport::soft::SoftTransport;
use naaice::transport::{
    Completion, ConnectionEvent, Endpoint, MemoryRegion, SendOp, SendWr, Sge, Transport,
    TransportError, WcStatus,
};

/// What the NAA did with a raw MRSP request.
#[derive(Debug, PartialEq, Eq)]
pub enum MrspAnswer {
    /// It answered with this message (an Advertisement or an Error).
    Reply(Vec<u8>),
    /// It hung up without answering.
    Disconnected,
}

/// Connects to `addr`, sends `request` as the MRSP SEND and waits (up to 10 s) for the answer.
/// A connection refused as overloaded is tried again: the worker of the previous connection
/// holds its slot until just after its answer went out, and the client may be back sooner.
pub fn raw_mrsp(addr: SocketAddr, request: &[u8]) -> MrspAnswer {
    let connect_by = Instant::now() + Duration::from_secs(10);
    let mut ep = loop {
        match SoftTransport::default().connect(addr, None, connect_by) {
            Err(TransportError::Rejected(_)) if Instant::now() < connect_by => {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => break other.expect("raw client: connect"),
        }
    };
    let recv = Buffer::zeroed(1024);
    // A zero-length SEND still needs a registered region; it just has no SGE.
    let send = Buffer::from_slice(if request.is_empty() { &[0] } else { request });
    let recv_mr = ep.register(&recv).expect("register");
    let send_mr = ep.register(&send).expect("register");
    let sge = |mr: &naaice::transport::soft::SoftRegion, len: usize| Sge {
        addr: mr.addr(),
        len: len as u32,
        lkey: mr.lkey(),
    };
    ep.post_recv(1, Some(sge(&recv_mr, 1024)))
        .expect("post recv");
    ep.post_send(&[SendWr {
        wr_id: 2,
        op: SendOp::Send,
        local: (!request.is_empty()).then(|| sge(&send_mr, request.len())),
        solicited: true,
    }])
    .expect("post send");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut wc = [Completion::BLANK; 4];
    let mut disconnected = false;
    while Instant::now() < deadline {
        let n = ep.poll(&mut wc).expect("poll");
        for c in &wc[..n] {
            if c.wr_id == 1 && c.status == WcStatus::Success {
                let len = c.byte_len as usize;
                return MrspAnswer::Reply(recv.lock()[..len].to_vec());
            }
        }
        while let Some(e) = ep.poll_event() {
            disconnected |= e == ConnectionEvent::Disconnected;
        }
        if disconnected && n == 0 {
            return MrspAnswer::Disconnected;
        }
        if n == 0 && ep.wait_sleeping(deadline).is_err() {
            disconnected = true;
        }
    }
    panic!("raw client: no answer to the MRSP request within 10 s");
}

/// An Advertisement+Request (spec §2.3) with `(flags, size)` records: client address 0x1000
/// and rkey 0x77 for non-internal ones, requested address 0.
pub fn mrsp_request(records: &[(u8, u32)]) -> Vec<u8> {
    let mut m = vec![0x01, records.len() as u8, 0, 0];
    for &(flags, size) in records {
        let internal = flags & 0x01 != 0;
        m.extend_from_slice(&(u64::from(flags) << 56).to_be_bytes());
        m.extend_from_slice(&(if internal { 0u64 } else { 0x1000 }).to_be_bytes());
        m.extend_from_slice(&(if internal { 0u32 } else { 0x77 }).to_be_bytes());
        m.extend_from_slice(&size.to_be_bytes());
    }
    m
}
