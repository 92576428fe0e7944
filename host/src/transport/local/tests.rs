use std::time::{Duration, Instant};

use super::*;
use crate::memory::Buffer;
use crate::transport::{
    Completion, ConnectionEvent, Endpoint, Incoming, Listener, MemoryRegion, SendOp, SendWr, Sge,
    Transport, TransportError, WcOpcode, WcStatus,
};

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

/// A connected pair: (client, server).
fn pair() -> (LocalEndpoint, LocalEndpoint) {
    let mut listener = LocalTransport.listen(address(0)).unwrap();
    let addr = listener.local_addr();
    assert!(is_listening(addr));
    let server = std::thread::spawn(move || {
        let request = listener.next_request(soon()).unwrap().unwrap();
        request.accept().unwrap()
    });
    let client = LocalTransport.connect(addr, None, soon()).unwrap();
    (client, server.join().unwrap())
}

fn next(ep: &mut LocalEndpoint) -> Completion {
    let mut out = [Completion::BLANK];
    let deadline = soon();
    loop {
        if ep.poll(&mut out).unwrap() == 1 {
            return out[0];
        }
        assert!(ep.wait(Instant::now(), deadline).unwrap().ready());
    }
}

fn sge(region: &LocalRegion) -> Sge {
    Sge {
        addr: region.addr(),
        len: region.len() as u32,
        lkey: region.lkey(),
    }
}

#[test]
fn both_ends_see_the_connection_established_and_ended() {
    let (mut c, mut s) = pair();
    assert_eq!(c.poll_event(), Some(ConnectionEvent::Established));
    assert_eq!(s.poll_event(), Some(ConnectionEvent::Established));
    s.post_recv(7, None).unwrap();
    c.disconnect();
    assert_eq!(next(&mut s).status, WcStatus::WrFlush);
    assert_eq!(s.poll_event(), Some(ConnectionEvent::Disconnected));
    assert_eq!(c.poll_event(), Some(ConnectionEvent::Disconnected));
    assert!(matches!(
        c.wait(Instant::now(), soon()),
        Err(TransportError::NotConnected)
    ));
}

#[test]
fn a_send_and_a_write_with_immediate_arrive_in_order() {
    let (mut c, mut s) = pair();
    let src = Buffer::from_slice(b"hello, NAA");
    let src_mr = c.register(&src).unwrap();
    let recv = Buffer::zeroed(16);
    let recv_mr = s.register(&recv).unwrap();
    let target = Buffer::zeroed(10);
    let target_mr = s.register(&target).unwrap();
    s.post_recv(1, Some(sge(&recv_mr))).unwrap();
    s.post_recv(2, None).unwrap();
    let write = SendOp::write(target_mr.addr(), target_mr.rkey(), Some(0x0100_0002));
    c.post_send(&[
        SendWr::new(10, SendOp::Send, Some(sge(&src_mr))),
        SendWr {
            wr_id: 11,
            op: write,
            local: Some(sge(&src_mr)),
            solicited: true,
        },
    ])
    .unwrap();
    let (a, b) = (next(&mut s), next(&mut s));
    assert_eq!((a.wr_id, a.opcode, a.byte_len), (1, WcOpcode::Recv, 10));
    assert_eq!(
        (b.wr_id, b.opcode, b.imm),
        (2, WcOpcode::RecvRdmaWithImm, Some(0x0100_0002))
    );
    assert_eq!(&recv.to_vec()[..10], b"hello, NAA");
    assert_eq!(target.to_vec(), b"hello, NAA");
    let (x, y) = (next(&mut c), next(&mut c));
    assert_eq!(
        (x.wr_id, x.status, x.opcode),
        (10, WcStatus::Success, WcOpcode::Send)
    );
    assert_eq!(
        (y.wr_id, y.status, y.opcode),
        (11, WcStatus::Success, WcOpcode::RdmaWrite)
    );
}

#[test]
fn a_message_before_the_receive_waits_for_it() {
    let (mut c, mut s) = pair();
    let src = Buffer::from_slice(b"early");
    let src_mr = c.register(&src).unwrap();
    c.post_send(&[SendWr::new(1, SendOp::Send, Some(sge(&src_mr)))])
        .unwrap();
    assert_eq!(next(&mut c).status, WcStatus::Success);
    let recv = Buffer::zeroed(8);
    let recv_mr = s.register(&recv).unwrap();
    s.post_recv(3, Some(sge(&recv_mr))).unwrap();
    let got = next(&mut s);
    assert_eq!((got.wr_id, got.byte_len), (3, 5));
    assert_eq!(&recv.to_vec()[..5], b"early");
}

#[test]
fn a_write_with_a_wrong_rkey_fails_and_ends_the_connection() {
    let (mut c, mut s) = pair();
    let src = Buffer::from_slice(&[1; 64]);
    let src_mr = c.register(&src).unwrap();
    let target = Buffer::zeroed(32);
    let target_mr = s.register(&target).unwrap();
    s.post_recv(5, None).unwrap();
    let wrs = [
        // 64 bytes into a 32-byte region: out of bounds.
        SendWr::new(
            1,
            SendOp::write(target_mr.addr(), target_mr.rkey(), None),
            Some(sge(&src_mr)),
        ),
        SendWr::new(
            2,
            SendOp::write(target_mr.addr(), target_mr.rkey() ^ 1, Some(9)),
            None,
        ),
    ];
    c.post_send(&wrs).unwrap();
    assert_eq!(next(&mut c).status, WcStatus::RemoteAccess);
    assert_eq!(next(&mut c).status, WcStatus::WrFlush);
    assert_eq!(next(&mut s).status, WcStatus::WrFlush);
    assert_eq!(target.to_vec(), vec![0; 32]);
    assert!(matches!(
        c.post_send(&wrs),
        Err(TransportError::NotConnected)
    ));
}

#[test]
fn an_unknown_lkey_is_refused_at_post_time_and_nothing_is_posted() {
    let (mut c, _s) = pair();
    let src = Buffer::from_slice(b"x");
    let src_mr = c.register(&src).unwrap();
    let bad = Sge {
        lkey: src_mr.lkey() ^ 1,
        ..sge(&src_mr)
    };
    let wr = |wr_id, local| SendWr::new(wr_id, SendOp::Send, Some(local));
    assert!(matches!(
        c.post_send(&[wr(1, sge(&src_mr)), wr(2, bad)]),
        Err(TransportError::InvalidRequest("unknown lkey"))
    ));
    let mut out = [Completion::BLANK];
    assert_eq!(c.poll(&mut out).unwrap(), 0);
}

#[test]
fn a_rejected_request_gives_the_reason_and_nobody_listening_is_refused() {
    let mut listener = LocalTransport.listen(address(0)).unwrap();
    let addr = listener.local_addr();
    let server = std::thread::spawn(move || {
        let request = listener.next_request(soon()).unwrap().unwrap();
        request.reject("too many clients");
        listener
    });
    match LocalTransport.connect(addr, None, soon()) {
        Err(TransportError::Rejected(reason)) => assert_eq!(reason, "too many clients"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    drop(server.join().unwrap());
    assert!(!is_listening(addr));
    assert!(matches!(
        LocalTransport.connect(addr, None, soon()),
        Err(TransportError::Io {
            call: "connect",
            ..
        })
    ));
}

#[test]
fn a_request_nobody_takes_times_out() {
    let listener = LocalTransport.listen(address(0)).unwrap();
    let deadline = Instant::now() + Duration::from_millis(50);
    assert!(matches!(
        LocalTransport.connect(listener.local_addr(), None, deadline),
        Err(TransportError::TimedOut)
    ));
}

#[test]
fn a_sleeping_wait_is_woken_by_a_completion_and_by_the_waker() {
    let (mut c, mut s) = pair();
    s.post_recv(1, None).unwrap();
    let waker = s.waker().unwrap();
    let peer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        waker.wake();
        std::thread::sleep(Duration::from_millis(20));
        c.post_send(&[SendWr::new(1, SendOp::Send, None)]).unwrap();
        c
    });
    while s.poll_event().is_some() {}
    // Woken by the waker: not ready.
    assert!(!s.wait(Instant::now(), soon()).unwrap().ready());
    let got = next(&mut s);
    assert_eq!((got.wr_id, got.byte_len), (1, 0));
    drop(peer.join().unwrap());
}

#[test]
fn a_region_shared_with_the_server_moves_nothing() {
    let (mut c, s) = pair();
    let data = Buffer::from_slice(&[3; 4096]);
    let mr = c.register(&data).unwrap();
    // The client's end does not lend; the server's finds exactly registered regions only.
    assert!(c.shared_memory(mr.addr(), 4096).is_none());
    assert!(s.shared_memory(mr.addr(), 4095).is_none());
    let shared = s.shared_memory(mr.addr(), 4096).unwrap();
    assert!(shared.is(&data));
    let mut s = s;
    let shared_mr = s.register(&shared).unwrap();
    c.post_send(&[SendWr::new(
        1,
        SendOp::write(shared_mr.addr(), shared_mr.rkey(), None),
        Some(sge(&mr)),
    )])
    .unwrap();
    assert_eq!(next(&mut c).status, WcStatus::Success);
    assert_eq!(data.to_vec(), vec![3; 4096]);
}

#[test]
fn a_write_between_two_ranges_of_one_buffer_moves_like_memmove() {
    // One buffer registered on both ends (as a shared region is): a WRITE from its first 32
    // bytes to bytes 16..48 overlaps itself and must copy as memmove does.
    let (mut c, mut s) = pair();
    let data: Vec<u8> = (0..64).collect();
    let buffer = Buffer::from_slice(&data);
    let src = c.register(&buffer).unwrap();
    let dst = s.register(&buffer).unwrap();
    c.post_send(&[SendWr {
        wr_id: 1,
        op: SendOp::write(dst.addr() + 16, dst.rkey(), None),
        local: Some(Sge {
            addr: src.addr(),
            len: 32,
            lkey: src.lkey(),
        }),
        solicited: false,
    }])
    .unwrap();
    assert_eq!(next(&mut c).status, WcStatus::Success);
    let mut expected = data.clone();
    expected.copy_within(0..32, 16);
    assert_eq!(buffer.to_vec(), expected);
}

#[test]
fn more_work_requests_than_a_post_takes_are_refused_whole() {
    let (mut c, _s) = pair();
    let wr = SendWr::new(1, SendOp::Send, None);
    assert!(matches!(
        c.post_send(&vec![wr; 65]),
        Err(TransportError::InvalidRequest("send queue full"))
    ));
    let mut out = [Completion::BLANK];
    assert_eq!(c.poll(&mut out).unwrap(), 0);
}
