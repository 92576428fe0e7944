//! Frame-level tests: two engines exchange frames through these helpers, payloads are
//! copied between the buffers directly; no sockets, no threads, a virtual clock.

use super::*;
use crate::memory::Buffer;
use crate::transport::RemoteAddr;

fn settings() -> Settings {
    Settings {
        ack_timeout: Duration::from_millis(100),
        rnr_timeout: Duration::from_millis(40),
        ack_delay: Duration::from_millis(1),
        max_send_wr: 8,
        max_recv_wr: 8,
        faults: FaultPlan::default(),
    }
}

/// An established engine with one 64-byte region (key returned).
fn engine(t0: Instant) -> (Engine, Buffer, u32) {
    let mut e = Engine::new(settings(), t0);
    let buf = Buffer::zeroed(64);
    let key = e.regions.next_key().unwrap();
    e.regions.insert(&buf, 0x1000, key).unwrap();
    e.establish(t0);
    assert_eq!(e.poll_event(), Some(ConnectionEvent::Established));
    (e, buf, key)
}

fn sge(key: u32, offset: u64, len: u32) -> Sge {
    Sge {
        addr: 0x1000 + offset,
        len,
        lkey: key,
    }
}

fn wr(wr_id: u64, op: SendOp, local: Option<Sge>) -> SendWr {
    SendWr::new(wr_id, op, local)
}

fn remote(key: u32, offset: u64) -> RemoteAddr {
    RemoteAddr {
        addr: 0x1000 + offset,
        rkey: key,
    }
}

/// Moves every frame `from` transmits at `now` into `to`, through the wire encoding,
/// placing payloads; returns the frames.
fn deliver(from: &mut Engine, to: &mut Engine, now: Instant) -> Vec<Frame> {
    let mut seen = Vec::new();
    while let Some(t) = from.poll_transmit(now, usize::MAX) {
        let (frame, payload) = match t {
            Transmit::Control(f) => (f, Vec::new()),
            Transmit::Data { msn, frame, local } => {
                let bytes = local.map_or(Vec::new(), |l| {
                    l.buffer.nic_read(l.offset, l.len, <[u8]>::to_vec).unwrap()
                });
                from.handle_transmitted(now, msn);
                (frame, bytes)
            }
        };
        let frame = Frame::decode(&frame.encode()).unwrap();
        seen.push(frame);
        match to.handle_frame(now, frame) {
            Inbound::Place(l) => {
                l.buffer
                    .nic_write(l.offset, l.len, |d| d.copy_from_slice(&payload[..l.len]))
                    .unwrap();
                to.handle_placed(now);
            }
            Inbound::Done | Inbound::Stalled | Inbound::Closed => {}
        }
    }
    seen
}

fn completions(e: &mut Engine) -> Vec<(u64, WcStatus, WcOpcode)> {
    std::iter::from_fn(|| e.poll_completion())
        .map(|c| (c.wr_id, c.status, c.opcode))
        .collect()
}

#[test]
fn send_is_placed_and_acknowledged_after_the_delay() {
    let t0 = Instant::now();
    let (mut a, abuf, ak) = engine(t0);
    let (mut b, bbuf, bk) = engine(t0);
    abuf.lock()[..5].copy_from_slice(b"hello");
    b.post_recv(7, Some(sge(bk, 8, 16))).unwrap();
    a.post_send(&[wr(1, SendOp::Send, Some(sge(ak, 0, 5)))])
        .unwrap();
    deliver(&mut a, &mut b, t0);
    let c = b.poll_completion().unwrap();
    assert_eq!(
        (c.wr_id, c.status, c.opcode, c.byte_len),
        (7, WcStatus::Success, WcOpcode::Recv, 5)
    );
    assert_eq!(&bbuf.lock()[8..13], b"hello");
    // The ACK is held back for the delay...
    assert!(deliver(&mut b, &mut a, t0).is_empty());
    assert_eq!(b.poll_timeout(true), Some(t0 + settings().ack_delay));
    assert_eq!(b.poll_timeout(false), None);
    // ... and goes out after it.
    let later = t0 + settings().ack_delay;
    assert_eq!(deliver(&mut b, &mut a, later), [Frame::Ack { msn: 1 }]);
    assert_eq!(
        completions(&mut a),
        [(1, WcStatus::Success, WcOpcode::Send)]
    );
    assert_eq!(a.poll_timeout(true), None, "nothing awaits an ACK");
}

#[test]
fn a_list_with_a_bad_sge_queues_nothing() {
    let t0 = Instant::now();
    let (mut a, _, ak) = engine(t0);
    let (mut b, _, _) = engine(t0);
    for id in [7, 8] {
        b.post_recv(id, None).unwrap();
    }
    for bad in [sge(ak, 60, 8), sge(ak ^ 1, 0, 4)] {
        let list = [
            wr(1, SendOp::Send, Some(sge(ak, 0, 4))),
            wr(2, SendOp::Send, Some(bad)),
            wr(3, SendOp::Send, None),
        ];
        assert!(matches!(
            a.post_send(&list),
            Err(TransportError::InvalidRequest(_))
        ));
        assert!(deliver(&mut a, &mut b, t0).is_empty(), "nothing went out");
    }
    // The queue holds nothing of the refused lists: a good one goes out alone.
    a.post_send(&[wr(4, SendOp::Send, None)]).unwrap();
    assert_eq!(deliver(&mut a, &mut b, t0).len(), 1);
    assert_eq!(
        completions(&mut b),
        [(7, WcStatus::Success, WcOpcode::Recv)]
    );
}

#[test]
fn a_reply_carries_the_due_ack_and_acks_are_cumulative() {
    let t0 = Instant::now();
    let (mut a, _, ak) = engine(t0);
    let (mut b, _, bk) = engine(t0);
    b.post_recv(9, None).unwrap();
    a.post_recv(10, None).unwrap();
    let w = |id, imm| {
        wr(
            id,
            SendOp::WriteWithImm(remote(bk, 0), imm),
            Some(sge(ak, 0, 4)),
        )
    };
    a.post_send(&[
        wr(1, SendOp::Write(remote(bk, 4)), Some(sge(ak, 0, 8))),
        w(2, 0x81),
    ])
    .unwrap();
    deliver(&mut a, &mut b, t0);
    let c = b.poll_completion().unwrap();
    assert_eq!(
        (c.wr_id, c.opcode, c.imm),
        (9, WcOpcode::RecvRdmaWithImm, Some(0x81))
    );
    // The reply goes out before the delay: the ACK precedes it.
    b.post_send(&[wr(5, SendOp::WriteWithImm(remote(ak, 0), 3), None)])
        .unwrap();
    let frames = deliver(&mut b, &mut a, t0);
    assert_eq!(frames[0], Frame::Ack { msn: 2 });
    assert_eq!(
        completions(&mut a),
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::RdmaWrite),
            (10, WcStatus::Success, WcOpcode::RecvRdmaWithImm),
        ]
    );
}

#[test]
fn wrong_rkey_and_out_of_bounds_writes_are_naked() {
    for (rkey_delta, offset, len) in [(1, 0, 4), (0, 60, 8), (0, u64::MAX - 0x1000, 1)] {
        let t0 = Instant::now();
        let (mut a, _, ak) = engine(t0);
        let (mut b, _, bk) = engine(t0);
        b.post_recv(3, None).unwrap();
        let bad = RemoteAddr {
            addr: 0x1000u64.wrapping_add(offset),
            rkey: bk.wrapping_add(rkey_delta),
        };
        a.post_send(&[
            wr(1, SendOp::Write(remote(bk, 0)), Some(sge(ak, 0, 4))),
            wr(2, SendOp::Write(bad), Some(sge(ak, 0, len))),
            wr(3, SendOp::Send, None),
        ])
        .unwrap();
        // The frames after the refused one reach a closed responder and are ignored.
        deliver(&mut a, &mut b, t0);
        assert!(b.is_closed());
        assert_eq!(
            completions(&mut b),
            [(3, WcStatus::WrFlush, WcOpcode::Recv)]
        );
        assert_eq!(b.poll_event(), Some(ConnectionEvent::Disconnected));
        // The ACK for what was placed goes out before the NAK, then nothing.
        let frames = deliver(&mut b, &mut a, t0);
        assert_eq!(
            frames,
            [
                Frame::Ack { msn: 1 },
                Frame::Nak {
                    msn: 2,
                    status: WcStatus::RemoteAccess
                }
            ]
        );
        assert_eq!(
            completions(&mut a),
            [
                (1, WcStatus::Success, WcOpcode::RdmaWrite),
                (2, WcStatus::RemoteAccess, WcOpcode::RdmaWrite),
                (3, WcStatus::WrFlush, WcOpcode::Send),
            ]
        );
        assert_eq!(a.poll_event(), Some(ConnectionEvent::Disconnected));
        assert_eq!(a.ending(), Ending::Linger);
    }
}

#[test]
fn write_into_a_locked_buffer_is_refused() {
    let t0 = Instant::now();
    let (mut a, _, ak) = engine(t0);
    let (mut b, bbuf, bk) = engine(t0);
    let guard = bbuf.lock();
    a.post_send(&[wr(1, SendOp::Write(remote(bk, 0)), Some(sge(ak, 0, 4)))])
        .unwrap();
    deliver(&mut a, &mut b, t0);
    drop(guard);
    let frames = deliver(&mut b, &mut a, t0);
    assert!(matches!(
        frames[..],
        [Frame::Nak {
            msn: 1,
            status: WcStatus::RemoteAccess
        }]
    ));
    assert_eq!(
        completions(&mut a),
        [(1, WcStatus::RemoteAccess, WcOpcode::RdmaWrite)]
    );
}

#[test]
fn receiver_not_ready_keeps_the_peer_alive_then_continues() {
    let t0 = Instant::now();
    let (mut a, _, ak) = engine(t0);
    let (mut b, bbuf, bk) = engine(t0);
    a.post_send(&[wr(
        1,
        SendOp::WriteWithImm(remote(bk, 0), 5),
        Some(sge(ak, 0, 4)),
    )])
    .unwrap();
    let Some(Transmit::Data { msn, frame, .. }) = a.poll_transmit(t0, usize::MAX) else {
        panic!("no data frame");
    };
    a.handle_transmitted(t0, msn);
    assert!(matches!(b.handle_frame(t0, frame), Inbound::Stalled));
    assert!(b.is_stalled());
    // A keep-alive at once and one per quarter of the ACK timeout.
    assert_eq!(deliver(&mut b, &mut a, t0), [Frame::Nop]);
    let t1 = t0 + Duration::from_millis(25);
    assert_eq!(b.poll_timeout(true), Some(t1));
    b.handle_timeout(t1);
    a.handle_activity(t1);
    assert_eq!(deliver(&mut b, &mut a, t1), [Frame::Nop]);
    assert!(b.resume().is_none(), "still no receive");
    b.post_recv(4, None).unwrap();
    assert!(b.can_resume());
    let Some(Inbound::Place(l)) = b.resume() else {
        panic!("not resumed");
    };
    assert_eq!((l.offset, l.len), (0, 4));
    b.handle_placed(t1);
    b.flush_ack(t1);
    assert_eq!(deliver(&mut b, &mut a, t1), [Frame::Ack { msn: 1 }]);
    assert_eq!(completions(&mut b)[0].0, 4);
    assert_eq!(
        completions(&mut a),
        [(1, WcStatus::Success, WcOpcode::RdmaWrite)]
    );
    drop(bbuf);
}

#[test]
fn receiver_not_ready_times_out_with_rnr_nak() {
    let t0 = Instant::now();
    let (mut a, _, _) = engine(t0);
    let (mut b, _, _) = engine(t0);
    a.post_send(&[wr(1, SendOp::Send, None)]).unwrap();
    deliver(&mut a, &mut b, t0);
    assert!(b.is_stalled());
    let late = t0 + settings().rnr_timeout;
    b.handle_timeout(late);
    assert!(b.is_closed());
    let frames = deliver(&mut b, &mut a, late);
    assert_eq!(
        frames.last(),
        Some(&Frame::Nak {
            msn: 1,
            status: WcStatus::RnrRetryExceeded
        })
    );
    assert_eq!(
        completions(&mut a),
        [(1, WcStatus::RnrRetryExceeded, WcOpcode::Send)]
    );
}

#[test]
fn receive_too_small_is_a_length_error_at_both_ends() {
    let t0 = Instant::now();
    let (mut a, _, ak) = engine(t0);
    let (mut b, _, bk) = engine(t0);
    b.post_recv(1, Some(sge(bk, 0, 4))).unwrap();
    b.post_recv(2, Some(sge(bk, 0, 4))).unwrap();
    a.post_send(&[wr(1, SendOp::Send, Some(sge(ak, 0, 8)))])
        .unwrap();
    deliver(&mut a, &mut b, t0);
    assert_eq!(
        completions(&mut b),
        [
            (1, WcStatus::LocalLength, WcOpcode::Recv),
            (2, WcStatus::WrFlush, WcOpcode::Recv)
        ]
    );
    deliver(&mut b, &mut a, t0);
    assert_eq!(
        completions(&mut a),
        [(1, WcStatus::RemoteInvalidRequest, WcOpcode::Send)]
    );
}

#[test]
fn silent_peer_fails_with_retry_exceeded_unless_bytes_arrive() {
    let t0 = Instant::now();
    let (mut a, _, _) = engine(t0);
    let (mut b, _, _) = engine(t0);
    b.post_recv(1, None).unwrap();
    a.post_send(&[wr(1, SendOp::Send, None), wr(2, SendOp::Send, None)])
        .unwrap();
    deliver(&mut a, &mut b, t0);
    let timeout = settings().ack_timeout;
    assert_eq!(a.poll_timeout(false), Some(t0 + timeout));
    // Bytes from the peer postpone the timer.
    let t1 = t0 + timeout / 2;
    a.handle_activity(t1);
    a.handle_timeout(t0 + timeout);
    assert!(a.is_connected());
    a.handle_timeout(t1 + timeout);
    assert_eq!(
        completions(&mut a),
        [
            (1, WcStatus::RetryExceeded, WcOpcode::Send),
            (2, WcStatus::WrFlush, WcOpcode::Send)
        ]
    );
    assert_eq!(a.poll_event(), Some(ConnectionEvent::Disconnected));
    assert_eq!(a.ending(), Ending::Abort);
    assert!(
        a.poll_transmit(t1 + timeout, usize::MAX).is_none(),
        "no final frame"
    );
}

#[test]
fn acks_and_naks_outside_the_window_are_violations() {
    let t0 = Instant::now();
    for frame in [
        Frame::Ack { msn: 1 },
        Frame::Nak {
            msn: 1,
            status: WcStatus::General,
        },
        Frame::Hello,
    ] {
        let (mut a, _, _) = engine(t0);
        a.post_send(&[wr(1, SendOp::Send, None)]).unwrap();
        // Not transmitted yet: the peer cannot have seen it.
        assert!(matches!(a.handle_frame(t0, frame), Inbound::Closed));
        assert_eq!(a.ending(), Ending::Abort);
        assert_eq!(
            completions(&mut a),
            [(1, WcStatus::WrFlush, WcOpcode::Send)]
        );
    }
}

#[test]
fn disconnect_flushes_and_sends_dreq_once() {
    let t0 = Instant::now();
    let (mut a, _, _) = engine(t0);
    let (mut b, _, _) = engine(t0);
    a.post_recv(1, None).unwrap();
    a.post_send(&[wr(2, SendOp::Send, None)]).unwrap();
    a.disconnect();
    a.disconnect();
    assert_eq!(
        completions(&mut a),
        [
            (2, WcStatus::WrFlush, WcOpcode::Send),
            (1, WcStatus::WrFlush, WcOpcode::Recv)
        ]
    );
    assert_eq!(a.poll_event(), Some(ConnectionEvent::Disconnected));
    assert_eq!(a.poll_event(), None);
    assert_eq!(deliver(&mut a, &mut b, t0), [Frame::Dreq]);
    assert_eq!(b.poll_event(), Some(ConnectionEvent::Disconnected));
    assert_eq!(b.ending(), Ending::Abort);
    assert!(a.post_recv(3, None).is_err());
    assert!(matches!(
        a.post_send(&[wr(3, SendOp::Send, None)]),
        Err(TransportError::NotConnected)
    ));
}

#[test]
fn invalid_requests_are_refused_at_post_time_and_nothing_is_posted() {
    let t0 = Instant::now();
    let (mut a, _, ak) = engine(t0);
    let err = a.post_send(&[
        wr(1, SendOp::Send, Some(sge(ak, 0, 4))),
        wr(2, SendOp::Send, Some(sge(ak, 60, 8))),
    ]);
    assert!(matches!(err, Err(TransportError::InvalidRequest(_))));
    assert!(a.poll_transmit(t0, usize::MAX).is_none());
    assert!(a.post_recv(1, Some(sge(ak ^ 1, 0, 4))).is_err());
    let many: Vec<_> = (0..9).map(|i| wr(i, SendOp::Send, None)).collect();
    assert!(a.post_send(&many).is_err(), "more than max_send_wr");
    for i in 0..8 {
        a.post_recv(i, None).unwrap();
    }
    assert!(a.post_recv(8, None).is_err(), "more than max_recv_wr");
}

#[test]
fn large_frames_are_left_to_a_transmitter_that_takes_them() {
    let t0 = Instant::now();
    let (mut a, _, ak) = engine(t0);
    let (_, _, bk) = engine(t0);
    a.post_send(&[wr(1, SendOp::Write(remote(bk, 0)), Some(sge(ak, 0, 32)))])
        .unwrap();
    assert!(a.poll_transmit(t0, 16).is_none());
    assert!(a.has_data());
    assert!(matches!(
        a.poll_transmit(t0, 32),
        Some(Transmit::Data { msn: 1, .. })
    ));
    assert!(!a.has_data());
}

#[test]
fn a_dropped_frame_mutes_the_sender_and_the_request_times_out() {
    use super::super::fault::FrameKind;
    let t0 = Instant::now();
    let plan = FaultPlan::new().on_sent(FrameKind::WriteImm, 1, FaultAction::Drop);
    let mut a = Engine::new(
        Settings {
            faults: plan.clone(),
            ..settings()
        },
        t0,
    );
    let key = a.regions.next_key().unwrap();
    a.regions.insert(&Buffer::zeroed(64), 0x1000, key).unwrap();
    a.establish(t0);
    let (mut b, _, bk) = engine(t0);
    b.post_recv(1, None).unwrap();
    a.post_send(&[
        wr(1, SendOp::Write(remote(bk, 0)), Some(sge(key, 0, 4))),
        wr(2, SendOp::WriteWithImm(remote(bk, 0), 5), None),
        wr(3, SendOp::Send, None),
    ])
    .unwrap();
    // Only the WRITE before the fault reaches the peer; nothing follows it.
    let frames = deliver(&mut a, &mut b, t0);
    assert!(matches!(frames[..], [Frame::Write { .. }]), "{frames:?}");
    assert_eq!(plan.fired(), 1);
    b.flush_ack(t0);
    assert_eq!(deliver(&mut b, &mut a, t0), [Frame::Ack { msn: 1 }]);
    // The lost messages count as transmitted: the ACK timeout fails them.
    let expiry = a.poll_timeout(false).expect("ACK timer running");
    a.handle_timeout(expiry);
    assert_eq!(
        completions(&mut a),
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::RetryExceeded, WcOpcode::RdmaWrite),
            (3, WcStatus::WrFlush, WcOpcode::Send),
        ]
    );
    assert!(a.poll_transmit(expiry, usize::MAX).is_none());
}
