//! The machines' express lanes against their general paths, step by step. The server, on a
//! connection with spec vector B's regions (two of them written back): three RPCs served
//! through the lane leave exactly the state and hand out exactly the actions the general path
//! does, and every case the lane must leave alone changes nothing. The client, with a
//! single-send input, a second input and an output: three RPCs the same way, the reply
//! overtaking the write completion in one of them. (The property tests check the same at every
//! operation of random runs where a lane applies: `naaice_core::testkit::express`.)

use core::time::Duration;

use hex_literal::hex;
use naaice_core::machine::{
    Allocation, ClientAction, Express, KernelSet, Machine, Post, RecvBuffer, ServerAction, WrId,
};
use naaice_core::wire::imm::encode_request;
use naaice_core::wire::mrsp::{self, AdvertRecord};
use naaice_core::wire::{FunctionCode, ReturnCode};
use naaice_core::{
    Client, ClientConfig, ClientRegions, Input, Instant, RpcArgs, Server, ServerConfig,
};

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

fn drain<M: Machine>(m: &mut M) -> Vec<M::Action> {
    let mut buf = [0u8; 512];
    core::iter::from_fn(|| m.poll_action(&mut buf)).collect()
}

fn same_state<M: core::fmt::Debug>(a: &M, b: &M) {
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
                ServerAction::Allocate(Allocation { region, .. }) => {
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
        // The writes first: the receive that replaces the call's comes after them (the
        // spare serves the next call meanwhile, spec §3.9).
        let mut express: Vec<_> = writes
            .iter()
            .map(|w| ServerAction::Post(Post::Write(*w)))
            .collect();
        express.push(ServerAction::Post(Post::Recv {
            wr_id: answer.recv,
            buffer: RecvBuffer::Empty,
        }));
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

/// A client through its MRSP: parameters 0 (single-send input, 64 B), 1 (input, 100 B) and
/// 2 (output, 32 B).
/// A client after its MRSP, and the receive it posted ahead for its first RPC's reply.
fn ready_client(now: Instant) -> (Client, WrId) {
    let mut regions = ClientRegions::new();
    for (i, size) in [64u64, 100, 32].into_iter().enumerate() {
        let id = regions
            .add_param(0x1000 * (i as u64 + 1), 7, size)
            .expect("param");
        match i {
            0 => {
                regions.set_input(id).expect("input");
                regions.set_single_send(id).expect("single send");
            }
            1 => regions.set_input(id).expect("input"),
            _ => regions.set_output(id).expect("output"),
        }
    }
    let mut c = Client::new(ClientConfig::new(fncode(1)), regions);
    c.handle_input(now, Input::AddressResolved);
    c.handle_input(now, Input::Established);
    c.start_mrsp(now).expect("start MRSP");
    let actions = drain(&mut c);
    let (mut send, mut recv) = (None, None);
    for a in actions {
        match a {
            ClientAction::Post(Post::Send { wr_id, .. }) => send = Some(wr_id),
            ClientAction::Post(Post::Recv { wr_id, .. }) => recv = Some(wr_id),
            _ => {}
        }
    }
    let records = (0..3u32).map(|i| AdvertRecord {
        addr: 0x9000_0000 + 0x1000 * u64::from(i),
        rkey: 0x55,
        size: 4096,
    });
    let mut advert = [0u8; 64];
    let len = mrsp::emit_advertise(&mut advert, records).expect("advertisement");
    c.handle_input(now, Input::SendCompleted(send.expect("MRSP send")));
    c.handle_input(
        now,
        Input::Received {
            wr_id: recv.expect("MRSP receive"),
            data: &advert[..len],
        },
    );
    let actions = drain(&mut c);
    assert!(c.mrsp_done(), "MRSP did not finish");
    let [
        ClientAction::Post(Post::Recv {
            wr_id: spare,
            buffer: RecvBuffer::Empty,
        }),
        ClientAction::MrspComplete,
    ] = actions[..]
    else {
        panic!("the first reply's receive is posted with the MRSP's end: {actions:?}");
    };
    (c, spare)
}

#[test]
fn the_client_express_lane_runs_rpcs_as_the_general_path_does() {
    let mut now = Instant::ZERO;
    let (mut c, mut recv) = ready_client(now);
    let args = RpcArgs {
        timeout: Duration::from_secs(1),
        ..c.config().rpc_args()
    };
    for rpc in 1..=3u32 {
        let mut g = c.clone();
        g.start_rpc(now, args).expect("start RPC");
        let general = drain(&mut g);
        let spare = c.express_rpc(now, args).expect("start RPC");
        let spare = spare.expect("the lane takes the start");
        let writes: Vec<_> = core::iter::from_fn(|| c.express_write()).collect();
        // The writes, then the next RPC's receive (this reply's was posted ahead).
        let mut express: Vec<_> = writes
            .iter()
            .map(|w| ClientAction::Post(Post::Write(*w)))
            .collect();
        express.push(ClientAction::Post(Post::Recv {
            wr_id: spare,
            buffer: RecvBuffer::Empty,
        }));
        assert_eq!(general, express);
        assert_ne!(spare, recv);
        // The single-send input goes out with the first RPC only.
        assert_eq!(writes.len(), if rpc == 1 { 2 } else { 1 });
        same_state(&c, &g);

        now = now + Duration::from_micros(50);
        let reply = Input::WriteImmReceived {
            wr_id: recv,
            imm: ReturnCode::new(rpc).expect("rc").to_imm(),
            len: 32,
        };
        let mut inputs: Vec<Input<'_>> = writes
            .iter()
            .map(|w| Input::WriteCompleted(w.wr_id))
            .collect();
        // In the second RPC the reply overtakes the write completion (D-20).
        if rpc == 2 {
            inputs.insert(0, reply);
        } else {
            inputs.push(reply);
        }
        for (k, input) in inputs.iter().enumerate() {
            g.handle_input(now, *input);
            let general = drain(&mut g);
            let express = c.express_input(*input);
            if k + 1 == inputs.len() {
                let Express::Finished(result) = express else {
                    panic!("the last completion did not finish the RPC: {express:?}");
                };
                assert_eq!(general, [ClientAction::RpcComplete(result)]);
                assert_eq!(result.status, ReturnCode::new(rpc).expect("rc"));
                assert_eq!(c.last_result(), Some(result));
            } else {
                assert_eq!(express, Express::Taken);
                assert!(general.is_empty());
            }
            same_state(&c, &g);
        }
        recv = spare;
    }
    // Nothing in flight: a completion is not the lane's.
    let before = c.clone();
    let stray = Input::WriteCompleted(WrId::from_raw((4 << 32) | 1));
    assert_eq!(c.express_input(stray), Express::NotTaken);
    same_state(&c, &before);
}
