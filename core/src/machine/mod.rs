//! The protocol state machines, sans-IO: [`Client`] (host role) and [`Server`] (NAA role).
//!
//! Both implement [`Machine`] (after quinn-proto's `Connection`):
//! * **inputs**: [`Machine::handle_input`] with the caller's current [`Instant`] and an
//!   [`Input`] (connection events and work completions), and [`Machine::handle_timeout`] once
//!   the instant from [`Machine::poll_timeout`] has passed;
//! * **commands** (role-specific methods): start the MRSP or an RPC ([`Client`]), report an
//!   allocation or a finished kernel ([`Server`]);
//! * **outputs**: [`Machine::poll_action`] until it returns `None`, executing every action in
//!   order: [`ClientAction`] or [`ServerAction`]. Both carry the work requests to post as
//!   [`Post`] (shared by the roles, so one driver executes them); the other variants are the
//!   role's events ([`ClientEvent`], [`ServerEvent`]); [`MachineAction::sort`] is the one
//!   place that tells them apart. A [`Post::Send`] has written its message into the `buf`
//!   given to `poll_action` (at least [`crate::config::MRSP_RECV_LEN`] bytes; the caller
//!   sends those bytes from its registered send buffer). Consecutive [`Post::Write`]s form
//!   one RPC's write list and may be posted as one linked list.
//!
//! **State.** Each machine keeps its protocol state as a private enum whose variants carry
//! their data (deadline, counters, the refusal code …), so impossible combinations cannot be
//! represented; [`Machine::phase`] derives the C-numbered [`Phase`] from it. The machine also
//! keeps what a host would otherwise track beside it: the terminal error
//! ([`Machine::error`]), whether the MRSP is done ([`Client::mrsp_done`]), whether an MRSP or
//! RPC is in flight ([`Client::is_busy`]) and the last RPC's result ([`Client::last_result`]).
//!
//! **Express lanes.** A steady RPC can also skip the action queue's round trip:
//! [`Server::express_call`], [`Server::express_answer`] and [`Server::express_write_done`] on
//! the NAA, [`Client::express_rpc`] and [`Client::express_input`] on the host. A lane is a
//! guard (nothing else queued, no deadline passed, no RPC waiting) in front of the general
//! transition, followed by an inline drain of what that transition queued: there is one
//! transition per event, whichever way it is reached. Where the guard refuses, nothing
//! changed and the caller feeds the input as usual. The testkit still checks every lane
//! against the general path at each step of the property tests and fuzz runs.
//!
//! The machines never read a clock, never allocate and never panic; every peer value is
//! validated and a violation ends in a `Failed` action (and [`Phase::Error`], with the error
//! kept as [`Machine::error`]). A failed or disconnected machine ignores further inputs.

mod action;
mod client;
mod server;

pub use action::{
    Allocation, ClientAction, ClientEvent, KernelCall, Machine, MachineAction, Post, RecvBuffer,
    RpcResult, ServerAction, ServerEvent, Step, Write,
};
pub use client::{Client, ClientConfig, Express, RpcArgs};
pub use server::{ExpressAnswer, KernelSet, Placement, Server, ServerConfig};

use crate::region::RegionError;
use crate::time::Instant;
use crate::wire::mrsp::MsgType;
use crate::wire::{self, MrspErrorCode};

/// Connection phases, with the numeric values of the C reference (spec §4.1). The order is
/// meaningful: the C code compares phases numerically.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Phase {
    /// 0: created.
    Init = 0,
    /// 1: address resolved (client).
    Ready = 1,
    /// 2: connection established.
    Connected = 2,
    /// 3: the peer disconnected.
    Disconnected = 3,
    /// 10: MRSP message posted, waiting for its send completion.
    MrspSending = 10,
    /// 11: waiting for the peer's MRSP message.
    MrspReceiving = 11,
    /// 12: MRSP done, ready for RPCs.
    MrspDone = 12,
    /// 20: RPC writes posted, waiting for their completions.
    DataSending = 20,
    /// 21: the NAA runs the kernel (server only).
    Calculating = 21,
    /// 22: waiting for the peer's final WRITE WITH IMMEDIATE.
    DataReceiving = 22,
    /// 30: client: an RPC finished; server: the client disconnected.
    Finished = 30,
    /// 40: failed; the connection is unusable.
    Error = 40,
}

impl Phase {
    /// The numeric state value of the C API (`naa_status.state`).
    pub const fn value(self) -> u8 {
        self as u8
    }

    /// The phase with C state value `value`, if there is one.
    pub const fn from_value(value: u8) -> Option<Self> {
        Some(match value {
            0 => Self::Init,
            1 => Self::Ready,
            2 => Self::Connected,
            3 => Self::Disconnected,
            10 => Self::MrspSending,
            11 => Self::MrspReceiving,
            12 => Self::MrspDone,
            20 => Self::DataSending,
            21 => Self::Calculating,
            22 => Self::DataReceiving,
            30 => Self::Finished,
            40 => Self::Error,
            _ => return None,
        })
    }
}

impl core::fmt::Display for Phase {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::Init => "INIT",
            Self::Ready => "READY",
            Self::Connected => "CONNECTED",
            Self::Disconnected => "DISCONNECTED",
            Self::MrspSending => "MRSP_SENDING",
            Self::MrspReceiving => "MRSP_RECEIVING",
            Self::MrspDone => "MRSP_DONE",
            Self::DataSending => "DATA_SENDING",
            Self::Calculating => "CALCULATING",
            Self::DataReceiving => "DATA_RECEIVING",
            Self::Finished => "FINISHED",
            Self::Error => "ERROR",
        })
    }
}

/// Identifies a work request: the caller posts it with this value and passes it back in the
/// completion. Opaque apart from [`WrId::raw`]/[`WrId::from_raw`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WrId(u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum WrKind {
    MrspRecv = 1,
    MrspSend = 2,
    DataRecv = 3,
    Write = 4,
    ErrorWrite = 5,
}

impl WrId {
    /// The value to hand to the transport (`wr_id` of verbs).
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// Rebuilds an id from a completion's `wr_id`.
    pub const fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    pub(crate) const fn new(kind: WrKind, index: u32) -> Self {
        Self(((kind as u64) << 32) | index as u64)
    }

    pub(crate) fn kind(self) -> Option<WrKind> {
        match self.0 >> 32 {
            1 => Some(WrKind::MrspRecv),
            2 => Some(WrKind::MrspSend),
            3 => Some(WrKind::DataRecv),
            4 => Some(WrKind::Write),
            5 => Some(WrKind::ErrorWrite),
            _ => None,
        }
    }
}

/// Why a work request failed (after `ibv_wc_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WorkError {
    /// Incoming message longer than the receive buffer.
    LocalLength,
    /// Local buffer outside its registration or inaccessible.
    LocalProtection,
    /// Flushed: the connection had already failed.
    Flushed,
    /// The peer refused the access (rkey, bounds).
    RemoteAccess,
    /// The peer found the request invalid.
    RemoteInvalidRequest,
    /// The peer had no receive posted.
    RnrRetryExceeded,
    /// The peer did not answer (retries exhausted).
    RetryExceeded,
    /// Anything else.
    Other,
}

/// Everything the caller reports to a machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input<'a> {
    /// rdma_cm resolved the address (client; INIT → READY).
    AddressResolved,
    /// The connection is established.
    Established,
    /// The peer disconnected or the connection broke.
    Disconnected,
    /// A SEND completed successfully.
    SendCompleted(WrId),
    /// An RDMA WRITE (with or without immediate) completed successfully.
    WriteCompleted(WrId),
    /// A receive was consumed by a SEND carrying `data` (`byte_len` bytes of the buffer).
    Received {
        /// The receive's id.
        wr_id: WrId,
        /// The received bytes.
        data: &'a [u8],
    },
    /// A receive was consumed by a WRITE WITH IMMEDIATE.
    WriteImmReceived {
        /// The receive's id.
        wr_id: WrId,
        /// The immediate value in host order.
        imm: u32,
        /// `byte_len`: the length of that one write.
        len: u32,
    },
    /// A work request completed with an error status.
    WorkFailed {
        /// The work request.
        wr_id: WrId,
        /// The status.
        error: WorkError,
    },
    /// Posting the work request failed locally (it will never complete).
    PostFailed(WrId),
}

/// Errors of the machines: peer misbehaviour, failed work, timeouts and invalid commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The peer sent a malformed MRSP message.
    Malformed(wire::Error),
    /// The peer sent an MRSP message of the wrong type.
    UnexpectedMessage(MsgType),
    /// The NAA refused the MRSP request.
    MrspRejected(MrspErrorCode),
    /// The Advertisement has a different number of records than the client has parameters.
    AdvertCountMismatch {
        /// Parameter regions.
        expected: u8,
        /// Records received.
        got: u8,
    },
    /// An advertised NAA region is smaller than the client's region.
    AdvertTooSmall {
        /// Region index.
        region: u8,
        /// Advertised size.
        advertised: u32,
        /// Needed size.
        needed: u32,
    },
    /// An advertised region's address range wraps around.
    AdvertAddressOverflow {
        /// Region index.
        region: u8,
    },
    /// The request declares no parameter region (nothing to reply into).
    NoParameterRegions,
    /// A requested region is empty or larger than [`crate::config::MAX_REGION_BYTES`].
    RegionSize {
        /// Region index.
        region: u8,
        /// Requested size in bytes.
        size: u32,
    },
    /// More regions than allowed.
    TooManyRegions {
        /// Regions declared.
        count: u8,
        /// The limit.
        max: u8,
    },
    /// A completion or message that does not fit the current phase.
    Unexpected {
        /// The phase it arrived in.
        phase: Phase,
    },
    /// A completion for a work request this machine never posted.
    UnknownWorkRequest(WrId),
    /// A work request failed.
    WorkFailed {
        /// The work request.
        wr_id: WrId,
        /// The status.
        error: WorkError,
    },
    /// Posting a work request failed.
    PostFailed(WrId),
    /// The peer disconnected while an operation was in progress.
    PeerDisconnected {
        /// The phase at the time.
        phase: Phase,
    },
    /// The peer went silent for longer than the phase's timeout.
    Timeout {
        /// The phase that timed out.
        phase: Phase,
    },
    /// The client signalled a host-side error (immediate value 0).
    ClientSignalledError,
    /// A command was given in a phase that does not allow it.
    WrongPhase {
        /// The current phase.
        phase: Phase,
    },
    /// A region-table operation failed.
    Region(RegionError),
    /// The caller's send buffer is too small for the message.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        len: usize,
    },
    /// An internal queue overflowed (a bug; reported instead of panicking).
    QueueOverflow,
}

impl From<RegionError> for Error {
    fn from(e: RegionError) -> Self {
        Self::Region(e)
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::Malformed(e) => write!(f, "malformed MRSP message from the peer: {e}"),
            Self::UnexpectedMessage(t) => {
                write!(f, "unexpected MRSP message type {:#04x}", t as u8)
            }
            Self::MrspRejected(code) => write!(f, "the NAA refused the MRSP request: {code}"),
            Self::AdvertCountMismatch { expected, got } => write!(
                f,
                "the NAA advertised {got} regions, the client has {expected} parameters"
            ),
            Self::AdvertTooSmall {
                region,
                advertised,
                needed,
            } => write!(
                f,
                "NAA region {region} has {advertised} bytes, {needed} are needed"
            ),
            Self::AdvertAddressOverflow { region } => {
                write!(f, "NAA region {region}: address range wraps around")
            }
            Self::NoParameterRegions => f.write_str("no parameter region declared"),
            Self::RegionSize { region, size } => write!(
                f,
                "region {region}: {size} bytes is outside 1 byte ..= {} bytes",
                crate::config::MAX_REGION_BYTES
            ),
            Self::TooManyRegions { count, max } => {
                write!(f, "{count} regions exceed the limit of {max}")
            }
            Self::Unexpected { phase } => write!(f, "unexpected completion in phase {phase}"),
            Self::UnknownWorkRequest(id) => {
                write!(f, "completion for unknown work request {:#x}", id.0)
            }
            Self::WorkFailed { wr_id, error } => {
                write!(f, "work request {:#x} failed: {error:?}", wr_id.0)
            }
            Self::PostFailed(id) => write!(f, "posting work request {:#x} failed", id.0),
            Self::PeerDisconnected { phase } => write!(f, "peer disconnected in phase {phase}"),
            Self::Timeout { phase } => write!(f, "timed out in phase {phase}"),
            Self::ClientSignalledError => {
                f.write_str("the client signalled an error (immediate 0)")
            }
            Self::WrongPhase { phase } => write!(f, "not allowed in phase {phase}"),
            Self::Region(e) => write!(f, "{e}"),
            Self::BufferTooSmall { needed, len } => {
                write!(f, "send buffer has {len} bytes, the message needs {needed}")
            }
            Self::QueueOverflow => f.write_str("internal action queue overflow"),
        }
    }
}

impl core::error::Error for Error {}

/// Capacity of the machines' action queues (actions are generated lazily; the queue only
/// ever holds a handful).
pub(crate) const QUEUE_LEN: usize = 8;

/// A timer deadline helper shared by both machines.
pub(crate) fn expired(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|d| now >= d)
}
