//! Checks of the machines' express lanes against their general paths: before an operation a
//! lane would take, a copy of the machine takes it through the lane; after the general path
//! ran and was drained, both machines must be in the same state and the lane must have handed
//! out exactly the actions the general path did (see `Server::express_call` and
//! `Client::express_rpc`).

use core::fmt::Debug;
use std::format;
use std::vec::Vec;

use super::ops::{Harness, Op, return_code, rpc_args};
use crate::machine::{ClientAction, Express, Input, Machine, Post, RecvBuffer, ServerAction, WrId};
use crate::{Client, Server};

/// A copy of a machine that took an operation through the express lane, with the actions
/// the lane stands for.
#[derive(Debug)]
pub struct Shadow<M, A> {
    machine: M,
    actions: Vec<A>,
}

/// What the express lane does with one input.
enum Lane {
    Call(WrId, u32),
    WriteDone(WrId),
    Answer(u32),
}

/// The server lane's counterpart of `op` on `s`, if it takes it (`None`: it does not apply).
pub fn server_shadow(
    s: &Server,
    h: &Harness<ServerAction>,
    op: &Op,
) -> Option<Shadow<Server, ServerAction>> {
    let lane = match *op {
        Op::WriteImm(i, imm, _) => Lane::Call(h.wr_id(i), imm),
        Op::WriteCompleted(i) => Lane::WriteDone(h.wr_id(i)),
        Op::KernelFinished(rc) => Lane::Answer(rc),
        Op::Complete(i, imm, len) if !h.outstanding.is_empty() => {
            match h.outstanding[usize::from(i) % h.outstanding.len()] {
                ServerAction::Post(Post::Recv {
                    wr_id,
                    buffer: RecvBuffer::Empty,
                }) => Lane::Call(wr_id, imm),
                ServerAction::Post(Post::Write(w)) => Lane::WriteDone(w.wr_id),
                ServerAction::RunKernel(_) => Lane::Answer(len & 0x7F),
                _ => return None,
            }
        }
        _ => return None,
    };
    let mut server = s.clone();
    let now = h.now;
    let actions = match lane {
        Lane::Call(wr_id, imm) => {
            let call = server.express_call(now, wr_id, imm)?;
            Vec::from([ServerAction::RunKernel(call)])
        }
        Lane::WriteDone(wr_id) => {
            if !server.express_write_done(now, wr_id) {
                return None;
            }
            Vec::new()
        }
        Lane::Answer(rc) => {
            let answer = server.express_answer(now, return_code(rc))?;
            let mut actions: Vec<_> = server
                .answer_writes(answer.imm)
                .map(|w| ServerAction::Post(Post::Write(w)))
                .collect();
            actions.push(ServerAction::Post(Post::Recv {
                wr_id: answer.recv,
                buffer: RecvBuffer::Empty,
            }));
            assert_eq!(
                actions.len(),
                usize::from(answer.writes) + 1,
                "express answer: the write count disagrees with its write list"
            );
            actions
        }
    };
    Some(Shadow {
        machine: server,
        actions,
    })
}

/// The client lane's counterpart of `op` on `c`, if it takes it (`None`: it does not apply).
pub fn client_shadow(
    c: &Client,
    h: &Harness<ClientAction>,
    op: &Op,
) -> Option<Shadow<Client, ClientAction>> {
    let mut client = c.clone();
    let now = h.now;
    let input = match *op {
        Op::StartRpc(args) => {
            let spare = client.express_rpc(now, rpc_args(c, args)).ok()??;
            let mut actions: Vec<_> = core::iter::from_fn(|| client.express_write())
                .map(|w| ClientAction::Post(Post::Write(w)))
                .collect();
            actions.push(ClientAction::Post(Post::Recv {
                wr_id: spare,
                buffer: RecvBuffer::Empty,
            }));
            return Some(Shadow {
                machine: client,
                actions,
            });
        }
        Op::WriteCompleted(i) => Input::WriteCompleted(h.wr_id(i)),
        Op::WriteImm(i, imm, len) => Input::WriteImmReceived {
            wr_id: h.wr_id(i),
            imm,
            len,
        },
        Op::Complete(i, imm, len) if !h.outstanding.is_empty() => {
            match h.outstanding[usize::from(i) % h.outstanding.len()] {
                ClientAction::Post(Post::Write(w)) => Input::WriteCompleted(w.wr_id),
                ClientAction::Post(Post::Recv {
                    wr_id,
                    buffer: RecvBuffer::Empty,
                }) => Input::WriteImmReceived {
                    wr_id,
                    imm: imm & 0xFFFF_FF00,
                    len,
                },
                _ => return None,
            }
        }
        _ => return None,
    };
    let actions = match client.express_input(input) {
        Express::NotTaken => return None,
        Express::Taken => Vec::new(),
        Express::Finished(result) => Vec::from([ClientAction::RpcComplete(result)]),
        Express::Queued => {
            let mut buf = [0u8; crate::config::MRSP_RECV_LEN];
            core::iter::from_fn(|| client.poll_action(&mut buf)).collect()
        }
    };
    Some(Shadow {
        machine: client,
        actions,
    })
}

impl<M: Machine + Debug, A: PartialEq + Debug> Shadow<M, A> {
    /// Panics unless `general` (the machine after the general path) is in the same state and
    /// `drained` (what its drain handed out) are the lane's actions.
    pub fn check(&self, general: &M, drained: &[A]) {
        assert_eq!(
            drained,
            &self.actions[..],
            "the express lane hands out other actions than the general path"
        );
        assert_eq!(
            format!("{general:?}"),
            format!("{:?}", self.machine),
            "the express lane leaves another state than the general path"
        );
    }
}
