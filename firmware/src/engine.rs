//! The RoCE engine seam: the hardware RoCEv2 data path as the soft-core sees it.
//!
//! The engine terminates the connections (CM handshake, RC transport, data placement) on its
//! own; the firmware drives it through a small command interface: accept or reject a
//! connection request, post receives, SENDs and RDMA WRITEs, and program the per-connection
//! **region table** that the engine checks every incoming RDMA WRITE against (address range,
//! rkey, access). Events (connection events and work completions) come out of one event
//! queue. The board module implements [`RoceEngine`] with MMIO registers; tests and the host
//! adapter implement it in software.

use naaice_core::machine::WorkError;

/// The engine's handle of one connection (its queue-pair number).
pub type ConnId = u16;

/// An event from the engine's event queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EngineEvent {
    /// A client asks to connect; answer with [`RoceEngine::accept`] or [`RoceEngine::reject`].
    ConnectRequest(ConnId),
    /// The connection is established.
    Established(ConnId),
    /// The peer disconnected or the connection broke; outstanding work is flushed.
    Disconnected(ConnId),
    /// A work request of the connection completed.
    Completion(ConnId, Completion),
}

/// A work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Completion {
    /// The work request id the firmware posted it with.
    pub wr_id: u64,
    /// What completed, or why it failed.
    pub kind: CompletionKind,
}

/// What a work completion reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CompletionKind {
    /// A SEND finished.
    Send,
    /// An RDMA WRITE (with or without immediate) finished.
    Write,
    /// A message receive was consumed by a SEND of `len` bytes; read it with
    /// [`RoceEngine::read_message`].
    Recv {
        /// Message length.
        len: u32,
    },
    /// A receive was consumed by a WRITE WITH IMMEDIATE.
    RecvImm {
        /// Immediate value, host order.
        imm: u32,
        /// Length of that one write.
        len: u32,
    },
    /// The work request failed.
    Failed(WorkError),
}

/// Access rights of a region-table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Access(u8);

impl Access {
    /// The peer may RDMA WRITE into the region (every parameter region, spec §1.1).
    pub const REMOTE_WRITE: Self = Self(0x1);
    /// The engine may read the region as the source of a write-back (output regions).
    pub const LOCAL_READ: Self = Self(0x2);

    /// The raw bits (as programmed into the engine).
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Both sets of rights.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// True if every right of `other` is granted.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

/// One entry of a connection's region table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RegionEntry {
    /// NAA (board) address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub size: u32,
    /// Remote key the peer must present.
    pub rkey: u32,
    /// Rights.
    pub access: Access,
}

/// One RDMA WRITE for the engine to post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WriteRequest {
    /// Work request id for the completion.
    pub wr_id: u64,
    /// NAA address of the data.
    pub local_addr: u64,
    /// Bytes to write (0: no data).
    pub len: u32,
    /// Client address.
    pub remote_addr: u64,
    /// Client rkey.
    pub rkey: u32,
    /// Immediate value (host order) for a WRITE WITH IMMEDIATE.
    pub imm: Option<u32>,
    /// Set the Solicited Event bit.
    pub solicited: bool,
}

/// The engine refused a command (queue full, unknown connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PostError;

/// The hardware RoCE engine (see the [module](self) documentation).
pub trait RoceEngine {
    /// Takes the next event from the event queue.
    fn poll_event(&mut self) -> Option<EngineEvent>;
    /// Accepts a requested connection (its first receive is already posted).
    fn accept(&mut self, conn: ConnId);
    /// Rejects a requested connection (no free slot).
    fn reject(&mut self, conn: ConnId);
    /// Disconnects (DREQ) and releases the connection; outstanding work is flushed.
    fn disconnect(&mut self, conn: ConnId);
    /// Posts a receive: for an MRSP message (`message`) or a zero-length one for a WRITE
    /// WITH IMMEDIATE.
    fn post_recv(&mut self, conn: ConnId, wr_id: u64, message: bool) -> Result<(), PostError>;
    /// Copies the message of the last [`CompletionKind::Recv`] of `conn` into `buf`; returns
    /// the bytes copied.
    fn read_message(&mut self, conn: ConnId, buf: &mut [u8]) -> usize;
    /// Posts a solicited SEND of `message`.
    fn post_send(&mut self, conn: ConnId, wr_id: u64, message: &[u8]) -> Result<(), PostError>;
    /// Posts an RDMA WRITE.
    fn post_write(&mut self, conn: ConnId, write: &WriteRequest) -> Result<(), PostError>;
    /// Programs entry `index` of the connection's region table.
    fn program_region(&mut self, conn: ConnId, index: u8, entry: &RegionEntry);
    /// Clears the connection's region table (every rkey of it becomes invalid).
    fn clear_regions(&mut self, conn: ConnId);
}
