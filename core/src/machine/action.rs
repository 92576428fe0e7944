//! What the machines ask their driver to do ([`ClientAction`], [`ServerAction`]), the work
//! requests both roles post ([`Post`]) and the [`Machine`] contract a generic driver uses.

use super::{Error, Input, Phase, WrId};
use crate::region::RegionId;
use crate::time::Instant;
use crate::wire::ReturnCode;

/// Which buffer a receive uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RecvBuffer {
    /// The MRSP message buffer, at least [`crate::config::MRSP_RECV_LEN`] bytes.
    Message,
    /// No buffer: a zero-length receive, consumed by a WRITE WITH IMMEDIATE.
    Empty,
}

/// One RDMA WRITE (or WRITE WITH IMMEDIATE) to post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Write {
    /// Work request id.
    pub wr_id: WrId,
    /// Local region the data comes from, starting at offset 0.
    pub region: RegionId,
    /// Bytes to write (0 = no scatter/gather element).
    pub len: u32,
    /// Remote address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Immediate value (host order) for a WRITE WITH IMMEDIATE.
    pub imm: Option<u32>,
    /// Set the Solicited Event bit.
    pub solicited: bool,
}

/// A work request to post on the connection's queue pair (both roles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Post {
    /// Post a receive.
    Recv {
        /// Work request id.
        wr_id: WrId,
        /// Which buffer.
        buffer: RecvBuffer,
    },
    /// Post a SEND, with the Solicited Event bit, of `buf[..len]` (`buf` as given to
    /// `poll_action`, see [`Machine::poll_action`]).
    Send {
        /// Work request id.
        wr_id: WrId,
        /// Message length.
        len: usize,
    },
    /// Post an RDMA WRITE. Consecutive writes form one write list and may be posted as one
    /// linked list (spec §3.1).
    Write(Write),
}

impl Post {
    /// The work request's id.
    pub const fn wr_id(&self) -> WrId {
        match *self {
            Self::Recv { wr_id, .. } | Self::Send { wr_id, .. } => wr_id,
            Self::Write(w) => w.wr_id,
        }
    }
}

/// A kernel the NAA must run (server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct KernelCall {
    /// Function code (1..=127, one of the configured kernels).
    pub fncode: u8,
    /// The immediate's three user bytes.
    pub user: [u8; 3],
    /// 1-based RPC counter of the connection.
    pub rpc: u32,
}

/// The outcome of one RPC (client).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RpcResult {
    /// The NAA's return code.
    pub status: ReturnCode,
    /// Length of the NAA's final write (spec §3.8).
    pub bytes_received: u32,
    /// 1-based RPC counter of the connection.
    pub rpc: u32,
}

/// What the client machine asks its driver to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ClientAction {
    /// Post a work request.
    Post(Post),
    /// The MRSP finished; RPCs may start.
    MrspComplete,
    /// An RPC finished (whatever its return code); also kept as
    /// [`super::Client::last_result`].
    RpcComplete(RpcResult),
    /// The connection failed (the machine is in [`Phase::Error`]); tear it down.
    Failed(Error),
}

/// A region the NAA must provide memory for ([`ServerAction::Allocate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Allocation {
    /// The region.
    pub region: RegionId,
    /// Its size.
    pub size: u32,
    /// The client's requested NAA address (honoured under [`super::Placement::Requested`]).
    pub requested_addr: u64,
    /// NAA-only memory: not registered for remote access, not advertised.
    pub internal: bool,
}

/// What the server (NAA) machine asks its driver to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ServerAction {
    /// Post a work request.
    Post(Post),
    /// Provide memory for a region, then call [`super::Server::region_assigned`] (or
    /// [`super::Server::assignment_failed`]).
    Allocate(Allocation),
    /// Run a kernel on the regions, then call [`super::Server::kernel_finished`].
    RunKernel(KernelCall),
    /// The MRSP finished; the NAA serves RPCs.
    MrspComplete,
    /// The connection failed (the machine is in [`Phase::Error`]); a
    /// [`ServerAction::Disconnect`] follows.
    Failed(Error),
    /// Tear the connection down (disconnect, release the regions).
    Disconnect,
}

/// An action sorted for its driver ([`MachineAction::sort`]): a work request to post, or an
/// event for the owner of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<E> {
    /// Post a work request.
    Post(Post),
    /// Report this to the owner of the connection.
    Event(E),
}

/// What the client machine reports to the owner of its connection (its actions other than
/// work requests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ClientEvent {
    /// The MRSP finished; RPCs may start.
    MrspComplete,
    /// An RPC finished (whatever its return code).
    RpcComplete(RpcResult),
    /// The connection failed; tear it down.
    Failed(Error),
}

/// What the server machine reports to the owner of its connection (its actions other than
/// work requests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ServerEvent {
    /// Provide memory for a region (see [`ServerAction::Allocate`]).
    Allocate(Allocation),
    /// Run a kernel, then call [`super::Server::kernel_finished`].
    RunKernel(KernelCall),
    /// The MRSP finished.
    MrspComplete,
    /// The connection failed; a [`ServerEvent::Disconnect`] follows.
    Failed(Error),
    /// Tear the connection down.
    Disconnect,
}

/// An action of either role, sorted in one place into work requests (which one driver
/// executes for both roles) and the role's events.
pub trait MachineAction: Copy + core::fmt::Debug {
    /// The role's events.
    type Event;

    /// Sorts the action.
    fn sort(self) -> Step<Self::Event>;

    /// The work request to post, if this action is one.
    fn post(&self) -> Option<Post> {
        match self.sort() {
            Step::Post(p) => Some(p),
            Step::Event(_) => None,
        }
    }
}

impl MachineAction for ClientAction {
    type Event = ClientEvent;

    fn sort(self) -> Step<ClientEvent> {
        Step::Event(match self {
            Self::Post(p) => return Step::Post(p),
            Self::MrspComplete => ClientEvent::MrspComplete,
            Self::RpcComplete(r) => ClientEvent::RpcComplete(r),
            Self::Failed(e) => ClientEvent::Failed(e),
        })
    }
}

impl MachineAction for ServerAction {
    type Event = ServerEvent;

    fn sort(self) -> Step<ServerEvent> {
        Step::Event(match self {
            Self::Post(p) => return Step::Post(p),
            Self::Allocate(a) => ServerEvent::Allocate(a),
            Self::RunKernel(k) => ServerEvent::RunKernel(k),
            Self::MrspComplete => ServerEvent::MrspComplete,
            Self::Failed(e) => ServerEvent::Failed(e),
            Self::Disconnect => ServerEvent::Disconnect,
        })
    }
}

/// The sans-IO contract both machines follow; see the [module docs](super) for the rules.
pub trait Machine {
    /// The role's action type.
    type Action: MachineAction;

    /// The next action, if any. `buf` (at least [`crate::config::MRSP_RECV_LEN`] bytes) is
    /// where a [`Post::Send`] has written its message, `buf[..len]`: the caller sends those
    /// bytes, from this buffer if it is the registered send buffer, else copied there.
    #[must_use]
    fn poll_action(&mut self, buf: &mut [u8]) -> Option<Self::Action>;

    /// Feeds a connection event or work completion.
    fn handle_input(&mut self, now: Instant, input: Input<'_>);

    /// Checks the deadline returned by [`Machine::poll_timeout`]; call it once that instant
    /// has passed (calling it earlier is harmless).
    fn handle_timeout(&mut self, now: Instant);

    /// The instant at which [`Machine::handle_timeout`] must be called, if any.
    fn poll_timeout(&self) -> Option<Instant>;

    /// The current phase, with the C reference's numbering.
    fn phase(&self) -> Phase;

    /// The error that ended the connection, once the machine is in [`Phase::Error`].
    fn error(&self) -> Option<Error>;
}
