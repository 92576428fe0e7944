//! Fuzz target: drives `naaice_core::Client` with an operation sequence decoded from the input
//! (connection events, completions with real or made-up ids, received messages, reply
//! immediates, commands, clock jumps). Asserts: no panic, every `poll_action` drain stops
//! within a bound, every Send is a valid MRSP message that fits the buffer, and an expired
//! deadline is cleared by `handle_timeout`.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use core::time::Duration;

use arbitrary::Arbitrary;
use common::{Harness, Op, Payload, payload_bytes, table_from, work_error};
use libfuzzer_sys::fuzz_target;
use naaice_core::machine::RecvBuffer;
use naaice_core::{Action, Client, ClientConfig, FunctionCode, Input, RegionId};

#[derive(Arbitrary, Debug)]
struct Case {
    fncode: u8,
    mrsp_timeout_us: u32,
    rpc_timeout_us: u32,
    max_records: Option<u8>,
    params: Vec<(u64, u32, u32, u8)>,
    internal: u8,
    addr_offset: Option<u64>,
    ops: Vec<Op>,
}

fuzz_target!(|case: Case| {
    let fncode = FunctionCode::new(case.fncode % 127 + 1).expect("1..=127");
    let mut config = ClientConfig::new(fncode);
    config.mrsp_timeout = Duration::from_micros(u64::from(case.mrsp_timeout_us));
    config.rpc_timeout = Duration::from_micros(u64::from(case.rpc_timeout_us));
    if let Some(max) = case.max_records {
        config.max_records = max;
    }
    let table = table_from(&case.params, case.internal, case.addr_offset.unwrap_or(0));
    let mut c = Client::new(config, table);
    let mut h = Harness::new();
    h.drain(|b| c.poll_action(b));
    for op in case.ops {
        let now = h.now;
        let sizes: Vec<u32> = c.regions().params().iter().map(|p| p.size).collect();
        match op {
            Op::AddressResolved => c.handle_input(now, Input::AddressResolved),
            Op::Established => c.handle_input(now, Input::Established),
            Op::Disconnected => c.handle_input(now, Input::Disconnected),
            Op::SendCompleted(i) => c.handle_input(now, Input::SendCompleted(h.wr_id(i))),
            Op::WriteCompleted(i) => c.handle_input(now, Input::WriteCompleted(h.wr_id(i))),
            Op::Received(i, p) => {
                let data = payload_bytes(&p, &sizes);
                c.handle_input(
                    now,
                    Input::Received {
                        wr_id: h.wr_id(i),
                        data: &data,
                    },
                );
            }
            Op::WriteImm(i, imm, len) => {
                c.handle_input(
                    now,
                    Input::WriteImmReceived {
                        wr_id: h.wr_id(i),
                        imm,
                        len,
                    },
                );
            }
            Op::WorkFailed(i, e) => {
                c.handle_input(
                    now,
                    Input::WorkFailed {
                        wr_id: h.wr_id(i),
                        error: work_error(e),
                    },
                );
            }
            Op::PostFailed(i) => c.handle_input(now, Input::PostFailed(h.wr_id(i))),
            Op::Advance(us) => {
                h.advance(us);
                c.handle_timeout(h.now);
            }
            Op::FireTimeout => {
                if let Some(t) = c.poll_timeout() {
                    h.now = h.now.max(t);
                    c.handle_timeout(h.now);
                    assert!(
                        c.poll_timeout().is_none_or(|d| d > h.now),
                        "expired deadline kept"
                    );
                }
            }
            Op::StartMrsp => {
                let _ = c.start_mrsp(now);
            }
            Op::StartRpc(None) => {
                let _ = c.start_rpc(now);
            }
            Op::StartRpc(Some(us)) => {
                let _ = c.start_rpc_with_timeout(now, Duration::from_micros(u64::from(us)));
            }
            Op::SetUserBytes(u) => {
                let _ = c.set_user_bytes(u);
            }
            Op::SetBytesToSend(r, l) => {
                let _ = c.set_bytes_to_send(RegionId::new(r), l);
            }
            Op::SmallBuffer(len) => h.buf_len = usize::from(len),
            Op::Complete(i, imm, len) => match h.take_outstanding(i) {
                Some(Action::PostRecv {
                    wr_id,
                    buffer: RecvBuffer::Message,
                }) => {
                    let data = payload_bytes(
                        &Payload::MatchingAdvert(0x55AA_0000_0000, 0xA000, len as u8),
                        &sizes,
                    );
                    c.handle_input(now, Input::Received { wr_id, data: &data });
                }
                Some(Action::PostRecv {
                    wr_id,
                    buffer: RecvBuffer::Empty,
                }) => {
                    c.handle_input(
                        now,
                        Input::WriteImmReceived {
                            wr_id,
                            imm: imm & 0xFFFF_FF00,
                            len,
                        },
                    );
                }
                Some(Action::Send { wr_id, .. }) => {
                    c.handle_input(now, Input::SendCompleted(wr_id))
                }
                Some(Action::Write(w)) => c.handle_input(now, Input::WriteCompleted(w.wr_id)),
                _ => {}
            },
            Op::RegionAssigned(..) | Op::AssignmentFailed(_) | Op::KernelFinished(_) => {}
        }
        h.drain(|b| c.poll_action(b));
    }
});
