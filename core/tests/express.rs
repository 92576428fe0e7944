//! The server's express lane against its general path, step by step on a connection with
//! spec vector B's regions (two of them written back): three RPCs served through the lane
//! leave exactly the state and hand out exactly the actions the general path does, and every
//! case the lane must leave alone changes nothing. (The property tests check the same at every
//! operation of random runs where the lane applies: `naaice_core::testkit::express`.)

use core::time::Duration;

use hex_literal::hex;
use naaice_core::machine::{KernelSet, Machine, Post, RecvBuffer, ServerAction, WrId};
use naaice_core::wire::imm::encode_request;
use naaice_core::wire::{FunctionCode, ReturnCode};
use naaice_core::{Input, Instant, Server, ServerConfig};

/// §10.2 Advertisement+Request (three parameters: single-send input, in-place, output; one
/// internal region), 100 bytes.
const B_AAR: [u8; 100] = hex!(
    "01040000060000001000200000007f00000a000000010001000000400c0000001000300000007f00000b000000010002000003e8080000001000400000007f00000c00000001000300000100010000001000000000000000000000000000000000002000"
);

fn fncode(code: u8) -> FunctionCode {
    FunctionCode::new(code).expect("valid function code")
}

fn config() -> ServerConfig {
    let mut cfg = ServerConfig::new(KernelSet::empty().with(fncode(1)));
    cfg.kernel_timeout = Duration::from_millis(5);
    cfg
}

fn drain(s: &mut Server) -> Vec<ServerAction> {
    let mut buf = [0u8; 512];
    core::iter::from_fn(|| s.poll_action(&mut buf)).collect()
}

fn same_state(a: &Server, b: &Server) {
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

/// A server through its MRSP, and the receive its first RPC consumes.
fn ready_server(now: Instant) -> (Server, WrId) {
    let mut s = Server::new(config(), now);
    let Some(ServerAction::Post(Post::Recv { wr_id, .. })) = drain(&mut s).pop() else {
        panic!("no MRSP receive");
    };
    s.handle_input(now, Input::Established);
    s.handle_input(
        now,
        Input::Received {
            wr_id,
            data: &B_AAR,
        },
    );
    let mut data_recv = None;
    for _ in 0..10 {
        let actions = drain(&mut s);
        if actions.is_empty() {
            break;
        }
        for action in actions {
            match action {
                ServerAction::Allocate { region, .. } => {
                    let addr = 0x10_0000 * (u64::from(region.index() as u8) + 1);
                    s.region_assigned(now, region, addr, 0x77)
                        .expect("region assigned");
                }
                ServerAction::Post(Post::Send { wr_id, .. }) => {
                    s.handle_input(now, Input::SendCompleted(wr_id));
                }
                ServerAction::Post(Post::Recv {
                    wr_id,
                    buffer: RecvBuffer::Empty,
                }) => data_recv = Some(wr_id),
                _ => {}
            }
        }
    }
    assert!(s.mrsp_done(), "MRSP did not finish");
    (s, data_recv.expect("the first RPC's receive"))
}

#[test]
fn the_express_lane_serves_rpcs_as_the_general_path_does() {
    let mut now = Instant::ZERO;
    let (mut s, mut recv) = ready_server(now);
    for rpc in 1..=3u8 {
        let imm = encode_request(fncode(1), [rpc, 0, 0]);
        let mut g = s.clone();
        g.handle_input(
            now,
            Input::WriteImmReceived {
                wr_id: recv,
                imm,
                len: 0,
            },
        );
        let general = drain(&mut g);
        let call = s
            .express_call(now, recv, imm)
            .expect("the lane takes the call");
        assert_eq!(call.user, [rpc, 0, 0]);
        assert_eq!(general, [ServerAction::RunKernel(call)]);
        same_state(&s, &g);

        now = now + Duration::from_micros(100);
        let rc = ReturnCode::new(u32::from(rpc)).expect("return code");
        g.kernel_finished(now, rc).expect("kernel finished");
        let general = drain(&mut g);
        let answer = s.express_answer(now, rc).expect("the lane answers");
        let writes: Vec<_> = s.answer_writes(answer.imm).collect();
        let mut express = vec![ServerAction::Post(Post::Recv {
            wr_id: answer.recv,
            buffer: RecvBuffer::Empty,
        })];
        express.extend(writes.iter().map(|w| ServerAction::Post(Post::Write(*w))));
        assert_eq!(general, express);
        assert_eq!(usize::from(answer.writes), writes.len());
        assert_eq!(writes.len(), 2, "vector B writes back two regions");
        let last = writes.last().expect("a last write");
        assert_eq!(last.imm, Some(rc.to_imm()));
        assert!(last.solicited && writes[0].imm.is_none());
        same_state(&s, &g);

        for w in &writes {
            now = now + Duration::from_micros(10);
            g.handle_input(now, Input::WriteCompleted(w.wr_id));
            assert!(drain(&mut g).is_empty());
            assert!(s.express_write_done(now, w.wr_id));
            same_state(&s, &g);
        }
        recv = answer.recv;
    }
    assert_eq!(s.rpc_count(), 3);
}

#[test]
fn the_express_lane_leaves_everything_else_unchanged() {
    let now = Instant::ZERO;
    let (mut s, recv) = ready_server(now);
    let before = s.clone();
    // An unknown function code, a client error, a receive that is not a data receive.
    assert!(
        s.express_call(now, recv, encode_request(fncode(2), [0; 3]))
            .is_none()
    );
    assert!(s.express_call(now, recv, 0).is_none());
    let write_id = WrId::from_raw((4 << 32) | 1);
    let call = encode_request(fncode(1), [0; 3]);
    assert!(s.express_call(now, write_id, call).is_none());
    // No answer without a kernel, no write completion without an answer.
    assert!(
        s.express_answer(now, ReturnCode::new(0).expect("rc"))
            .is_none()
    );
    assert!(!s.express_write_done(now, write_id));
    same_state(&s, &before);

    // A kernel past its deadline is the general path's (KERNEL_TIMEOUT).
    s.express_call(now, recv, call)
        .expect("the lane takes the call");
    let running = s.clone();
    let late = now + Duration::from_millis(6);
    assert!(
        s.express_answer(late, ReturnCode::new(0).expect("rc"))
            .is_none()
    );
    same_state(&s, &running);

    // A call that arrives during the write-back waits; the answer's completion then starts
    // it, which is the general path's.
    let answer = s
        .express_answer(now, ReturnCode::new(0).expect("rc"))
        .expect("answer");
    s.handle_input(
        now,
        Input::WriteImmReceived {
            wr_id: answer.recv,
            imm: call,
            len: 0,
        },
    );
    let waiting = s.clone();
    let first = s.answer_writes(answer.imm).next().expect("a write");
    assert!(!s.express_write_done(now, first.wr_id));
    same_state(&s, &waiting);
}
