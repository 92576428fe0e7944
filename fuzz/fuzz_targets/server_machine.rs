//! Fuzz target: drives `naaice_core::Server` with an operation sequence decoded from the input
//! (connection events, received MRSP messages, request immediates, completions with real or
//! made-up ids, region assignments, kernel results, clock jumps). Asserts: no panic, every
//! `poll_action` drain stops within a bound, and every Send is a valid MRSP message that fits
//! the buffer.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use core::time::Duration;

use arbitrary::Arbitrary;
use common::{Harness, Op, Payload, VALID_FLAGS, payload_bytes, work_error};
use libfuzzer_sys::fuzz_target;
use naaice_core::machine::{KernelSet, Placement, RecvBuffer};
use naaice_core::{Action, FunctionCode, Input, RegionId, ReturnCode, Server, ServerConfig};

#[derive(Arbitrary, Debug)]
struct Case {
    kernels: u128,
    max_regions: Option<u8>,
    max_total_bytes: Option<u64>,
    placement: Option<(u64, u64)>,
    mrsp_timeout_us: u32,
    kernel_timeout_us: u32,
    completion_timeout_us: u32,
    idle_timeout_us: Option<u32>,
    ops: Vec<Op>,
}

fn return_code(raw: u32) -> ReturnCode {
    ReturnCode::new(raw & ReturnCode::MAX_VALUE).unwrap_or(ReturnCode::SUCCESS)
}

fuzz_target!(|case: Case| {
    let mut kernels = KernelSet::empty();
    for code in 1u8..=127 {
        if case.kernels & (1u128 << code) != 0 {
            kernels.insert(FunctionCode::new(code).expect("1..=127"));
        }
    }
    let mut config = ServerConfig::new(kernels);
    if let Some(max) = case.max_regions {
        config.max_regions = max;
    }
    if let Some(max) = case.max_total_bytes {
        config.max_total_bytes = max;
    }
    if let Some((base, len)) = case.placement {
        config.placement = Placement::Requested { base, len };
    }
    config.mrsp_timeout = Duration::from_micros(u64::from(case.mrsp_timeout_us));
    config.kernel_timeout = Duration::from_micros(u64::from(case.kernel_timeout_us));
    config.completion_timeout = Duration::from_micros(u64::from(case.completion_timeout_us));
    config.idle_timeout = case
        .idle_timeout_us
        .map(|us| Duration::from_micros(u64::from(us)));

    let mut h = Harness::new();
    let mut s = Server::new(config, h.now);
    h.drain(|b| s.poll_action(b));
    for op in case.ops {
        let now = h.now;
        match op {
            Op::AddressResolved => s.handle_input(now, Input::AddressResolved),
            Op::Established => s.handle_input(now, Input::Established),
            Op::Disconnected => s.handle_input(now, Input::Disconnected),
            Op::SendCompleted(i) => s.handle_input(now, Input::SendCompleted(h.wr_id(i))),
            Op::WriteCompleted(i) => s.handle_input(now, Input::WriteCompleted(h.wr_id(i))),
            Op::Received(i, p) => {
                let data = payload_bytes(&p, &[]);
                s.handle_input(
                    now,
                    Input::Received {
                        wr_id: h.wr_id(i),
                        data: &data,
                    },
                );
            }
            Op::WriteImm(i, imm, len) => {
                s.handle_input(
                    now,
                    Input::WriteImmReceived {
                        wr_id: h.wr_id(i),
                        imm,
                        len,
                    },
                );
            }
            Op::WorkFailed(i, e) => {
                s.handle_input(
                    now,
                    Input::WorkFailed {
                        wr_id: h.wr_id(i),
                        error: work_error(e),
                    },
                );
            }
            Op::PostFailed(i) => s.handle_input(now, Input::PostFailed(h.wr_id(i))),
            Op::Advance(us) => {
                h.advance(us);
                s.handle_timeout(h.now);
            }
            Op::FireTimeout => {
                if let Some(t) = s.poll_timeout() {
                    h.now = h.now.max(t);
                    s.handle_timeout(h.now);
                }
            }
            Op::RegionAssigned(r, addr, rkey) => {
                let id = match r {
                    Some(r) => RegionId::new(r),
                    None => {
                        let next = s.regions().regions().iter().position(|r| r.local.is_none());
                        RegionId::new(next.unwrap_or(0) as u8)
                    }
                };
                let _ = s.region_assigned(now, id, addr, rkey);
            }
            Op::AssignmentFailed(r) => {
                let _ = s.assignment_failed(now, RegionId::new(r));
            }
            Op::KernelFinished(rc) => {
                let _ = s.kernel_finished(now, return_code(rc));
            }
            Op::SmallBuffer(len) => h.buf_len = usize::from(len),
            Op::Complete(i, imm, len) => match h.take_outstanding(i) {
                Some(Action::PostRecv {
                    wr_id,
                    buffer: RecvBuffer::Message,
                }) => {
                    let regions: Vec<(u8, u32)> = (0..(len % 6))
                        .map(|k| {
                            (
                                VALID_FLAGS[((imm >> (k * 3)) % 7) as usize],
                                1 + (imm >> k) % 9000,
                            )
                        })
                        .collect();
                    let data =
                        payload_bytes(&Payload::TableRequest(regions, (len >> 8) as u8, 0), &[]);
                    s.handle_input(now, Input::Received { wr_id, data: &data });
                }
                Some(Action::PostRecv {
                    wr_id,
                    buffer: RecvBuffer::Empty,
                }) => {
                    s.handle_input(now, Input::WriteImmReceived { wr_id, imm, len });
                }
                Some(Action::Send { wr_id, .. }) => {
                    s.handle_input(now, Input::SendCompleted(wr_id))
                }
                Some(Action::Write(w)) => s.handle_input(now, Input::WriteCompleted(w.wr_id)),
                Some(Action::Allocate { region, .. }) => {
                    let _ = s.region_assigned(now, region, u64::from(imm) << 12, len);
                }
                Some(Action::RunKernel(_)) => {
                    let _ = s.kernel_finished(now, return_code(len & 0x7F));
                }
                _ => {}
            },
            Op::StartMrsp | Op::StartRpc(_) | Op::SetUserBytes(_) | Op::SetBytesToSend(..) => {}
        }
        h.drain(|b| s.poll_action(b));
    }
});
