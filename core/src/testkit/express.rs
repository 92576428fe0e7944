//! Checks of the server's express lane against its general path: before an operation the
//! lane would take, a copy of the server takes it through the lane; after the general path
//! ran and was drained, both servers must be in the same state and the lane must have handed
//! out exactly the actions the general path did (see `Server::express_call`).

use std::format;
use std::vec::Vec;

use super::ops::{Harness, Op, return_code};
use crate::Server;
use crate::machine::{Post, RecvBuffer, ServerAction, WrId};

/// A copy of the server that took an operation through the express lane, with the actions
/// the lane stands for.
#[derive(Debug)]
pub struct Shadow {
    server: Server,
    actions: Vec<ServerAction>,
}

/// What the express lane does with one input.
enum Lane {
    Call(WrId, u32),
    WriteDone(WrId),
    Answer(u32),
}

/// The lane's counterpart of `op` on `s`, if it takes it (`None`: it does not apply).
pub fn shadow(s: &Server, h: &Harness<ServerAction>, op: &Op) -> Option<Shadow> {
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
            let mut actions = Vec::from([ServerAction::Post(Post::Recv {
                wr_id: answer.recv,
                buffer: RecvBuffer::Empty,
            })]);
            actions.extend(
                server
                    .answer_writes(answer.imm)
                    .map(|w| ServerAction::Post(Post::Write(w))),
            );
            assert_eq!(
                actions.len(),
                usize::from(answer.writes) + 1,
                "express answer: the write count disagrees with its write list"
            );
            actions
        }
    };
    Some(Shadow { server, actions })
}

impl Shadow {
    /// Panics unless `general` (the server after the general path) is in the same state and
    /// `drained` (what its drain handed out) are the lane's actions.
    pub fn check(&self, general: &Server, drained: &[ServerAction]) {
        assert_eq!(
            drained,
            &self.actions[..],
            "the express lane hands out other actions than the general path"
        );
        assert_eq!(
            format!("{general:?}"),
            format!("{:?}", self.server),
            "the express lane leaves another state than the general path"
        );
    }
}
