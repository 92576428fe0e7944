//! Test support shared by `core/tests` and `fuzz/` (feature `testkit`; uses `std` and
//! panics on failed checks, so it is for tests and fuzzing only, never for firmware).
//!
//! * [`ops`]: an operation interpreter that feeds a [`crate::Client`] or [`crate::Server`]
//!   arbitrary inputs, commands and clock jumps and checks that every `poll_action` drain
//!   terminates and every SEND is a valid MRSP message (property tests and fuzz targets).
//! * [`express`]: the server's express lane checked against its general path, at every
//!   operation of those runs where the lane applies.
//! * [`pair`]: a client and a server wired together in memory, with simulated region memory,
//!   RC link and virtual clock (after quinn-proto's `Pair`).

pub mod express;
pub mod ops;
pub mod pair;
pub mod run;

use crate::machine::{
    Allocation, ClientAction, Error, KernelCall, Post, RecvBuffer, RpcResult, ServerAction, WrId,
    Write,
};

/// The actions of both roles in one flat enum, for logs and trace assertions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(
    missing_docs,
    reason = "each variant mirrors the role action of the same name"
)]
pub enum AnyAction {
    PostRecv { wr_id: WrId, buffer: RecvBuffer },
    Send { wr_id: WrId, len: usize },
    Write(Write),
    Allocate(Allocation),
    RunKernel(KernelCall),
    MrspComplete,
    RpcComplete(RpcResult),
    Disconnect,
    Failed(Error),
}

impl From<Post> for AnyAction {
    fn from(p: Post) -> Self {
        match p {
            Post::Recv { wr_id, buffer } => Self::PostRecv { wr_id, buffer },
            Post::Send { wr_id, len } => Self::Send { wr_id, len },
            Post::Write(w) => Self::Write(w),
        }
    }
}

impl From<ClientAction> for AnyAction {
    fn from(a: ClientAction) -> Self {
        match a {
            ClientAction::Post(p) => p.into(),
            ClientAction::MrspComplete => Self::MrspComplete,
            ClientAction::RpcComplete(r) => Self::RpcComplete(r),
            ClientAction::Failed(e) => Self::Failed(e),
        }
    }
}

impl From<ServerAction> for AnyAction {
    fn from(a: ServerAction) -> Self {
        match a {
            ServerAction::Post(p) => p.into(),
            ServerAction::Allocate(a) => Self::Allocate(a),
            ServerAction::RunKernel(k) => Self::RunKernel(k),
            ServerAction::MrspComplete => Self::MrspComplete,
            ServerAction::Failed(e) => Self::Failed(e),
            ServerAction::Disconnect => Self::Disconnect,
        }
    }
}
