//! Runs of operations against one machine: each step applied, the machine drained, and the
//! express lane checked against the general path where it applies ([`super::express`]).

use std::vec::Vec;

use super::ops::{Harness, Op, Payload, payload_bytes, return_code, rpc_args};
use crate::machine::{Allocation, ClientAction, ClientConfig, Machine, ServerAction, ServerConfig};
use crate::region::{ClientRegions, RegionId};
use crate::{Client, Server};

/// The client's parameter sizes (for [`Payload::MatchingAdvert`]).
fn param_sizes(c: &Client) -> Vec<u32> {
    c.regions().params().iter().map(|p| p.size).collect()
}

/// Applies `op` to a client, then drains it; where the express lane applies, checks it
/// against the general path ([`super::express`]).
pub fn step_client(c: &mut Client, h: &mut Harness<ClientAction>, op: &Op) {
    let now = h.now;
    let shadow = super::express::client_shadow(c, h, op);
    let sizes = param_sizes(c);
    if !h.apply(c, op, &sizes) {
        match *op {
            Op::FireTimeout => {}
            Op::StartMrsp => {
                let _ = c.start_mrsp(now);
            }
            Op::StartRpc(args) => {
                let _ = c.start_rpc(now, rpc_args(c, args));
            }
            Op::SetBytesToSend(r, l) => {
                let _ = c.set_bytes_to_send(RegionId::new(r), l);
            }
            Op::Complete(i, imm, len) => {
                if let Some(ClientAction::Post(post)) = h.take_outstanding(i) {
                    let advert = Payload::MatchingAdvert(0x55AA_0000_0000, 0xA000, len as u8);
                    let recv = |id, _| Some((id, payload_bytes(&advert, &sizes), 0));
                    h.complete_post(c, post, recv, imm & 0xFFFF_FF00, len);
                }
            }
            _ => {}
        }
    }
    if *op == Op::FireTimeout {
        assert!(
            c.poll_timeout().is_none_or(|d| d > h.now),
            "the client kept an expired deadline"
        );
    }
    let before = h.outstanding.len();
    h.drain(c);
    if let Some(shadow) = shadow {
        shadow.check(c, &h.outstanding[before..]);
    }
}

/// Applies `op` to a server, then drains it; where the express lane applies, checks it
/// against the general path ([`super::express`]).
pub fn step_server(s: &mut Server, h: &mut Harness<ServerAction>, op: &Op) {
    let now = h.now;
    let shadow = super::express::server_shadow(s, h, op);
    if !h.apply(s, op, &[]) {
        match *op {
            Op::RegionAssigned(r, addr, rkey) => {
                let next = || s.regions().regions().iter().position(|r| r.local.is_none());
                let id = r.unwrap_or_else(|| next().unwrap_or(0) as u8);
                let _ = s.region_assigned(now, RegionId::new(id), addr, rkey);
            }
            Op::AssignmentFailed(r) => {
                let _ = s.assignment_failed(now, RegionId::new(r));
            }
            Op::KernelFinished(rc) => {
                let _ = s.kernel_finished(now, return_code(rc));
            }
            Op::Complete(i, imm, len) => match h.take_outstanding(i) {
                Some(ServerAction::Post(post)) => {
                    let request = |id, _| {
                        let regions: Vec<(u8, u32)> = (0..(len % 6))
                            .map(|k| ((imm >> (k * 3)) as u8 % 7, 1 + (imm >> k) % 9000))
                            .collect();
                        let p = Payload::TableRequest(regions, (len >> 8) as u8, 0);
                        Some((id, payload_bytes(&p, &[]), 0))
                    };
                    h.complete_post(s, post, request, imm, len);
                }
                Some(ServerAction::Allocate(Allocation { region, .. })) => {
                    let _ = s.region_assigned(now, region, u64::from(imm) << 12, len);
                }
                Some(ServerAction::RunKernel(_)) => {
                    let _ = s.kernel_finished(now, return_code(len & 0x7F));
                }
                _ => {}
            },
            _ => {}
        }
    }
    let before = h.outstanding.len();
    h.drain(s);
    if let Some(shadow) = shadow {
        shadow.check(s, &h.outstanding[before..]);
    }
}

/// Runs `ops` on a new client.
pub fn run_client(config: ClientConfig, table: ClientRegions, ops: &[Op]) {
    let mut c = Client::new(config, table);
    let mut h = Harness::default();
    h.drain(&mut c);
    for op in ops {
        step_client(&mut c, &mut h, op);
    }
}

/// Runs `ops` on a new server.
pub fn run_server(config: ServerConfig, ops: &[Op]) {
    let mut h = Harness::default();
    let mut s = Server::new(config, h.now);
    h.drain(&mut s);
    for op in ops {
        step_server(&mut s, &mut h, op);
    }
}
