//! The operation interpreter: one [`Op`] at a time fed to a machine, every action drained
//! and checked by a [`Harness`]. [`Op`] derives `arbitrary::Arbitrary` for the fuzz targets;
//! the property tests build the same values with proptest strategies.

use core::time::Duration;
use std::vec;
use std::vec::Vec;

use arbitrary::Arbitrary;

use crate::Client;
use crate::config::MRSP_RECV_LEN;
use crate::machine::{Input, Machine, MachineAction, Post, RecvBuffer, RpcArgs, WorkError, WrId};
use crate::region::ClientRegions;
use crate::time::Instant;
use crate::wire::mrsp::{self, AdvertRecord, Repr};
use crate::wire::{FunctionCode, ReturnCode};

/// Most actions one drain may produce before the machine is considered stuck.
pub const DRAIN_BOUND: usize = 1000;

/// The flag bytes the C client produces (spec §2.4).
pub const VALID_FLAGS: [u8; 7] = [0x00, 0x01, 0x04, 0x06, 0x08, 0x0C, 0x0E];

/// Where a work-request id comes from.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Id {
    /// One the machine handed out earlier (index modulo the number seen).
    Seen(u16),
    /// `(kind % 8) << 32 | index`, with small values.
    Shaped(u8, u8),
    /// Anything.
    Raw(u64),
}

/// What a received SEND carries.
#[derive(Arbitrary, Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// An Advertisement that fits the client's parameters (address, rkey, extra size).
    MatchingAdvert(u64, u32, u8),
    /// An Advertisement+Request built with [`table_from`] from (flag selector, size) pairs,
    /// a number of internal regions and an address offset.
    TableRequest(Vec<(u8, u32)>, u8, u64),
    /// An Error message with this code byte and padding.
    Error(u8, [u8; 2]),
}

/// One step of a run.
#[derive(Arbitrary, Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// [`Input::AddressResolved`].
    AddressResolved,
    /// [`Input::Established`].
    Established,
    /// [`Input::Disconnected`].
    Disconnected,
    /// [`Input::SendCompleted`].
    SendCompleted(Id),
    /// [`Input::WriteCompleted`].
    WriteCompleted(Id),
    /// [`Input::Received`].
    Received(Id, Payload),
    /// [`Input::WriteImmReceived`] with this immediate and length.
    WriteImm(Id, u32, u32),
    /// [`Input::WorkFailed`] with [`work_error`] of the byte.
    WorkFailed(Id, u8),
    /// [`Input::PostFailed`].
    PostFailed(Id),
    /// Advance the clock by this many microseconds and call `handle_timeout`.
    Advance(u64),
    /// Jump to the machine's deadline and call `handle_timeout`.
    FireTimeout,
    /// Client: `start_mrsp`.
    StartMrsp,
    /// Client: `start_rpc` with the configured arguments, or with this timeout in
    /// microseconds, user bytes and function code (`code % 127 + 1`).
    StartRpc(Option<(u32, [u8; 3], u8)>),
    /// Client: `set_bytes_to_send`.
    SetBytesToSend(u8, Option<u32>),
    /// Server: `region_assigned` (region, or the next unassigned one).
    RegionAssigned(Option<u8>, u64, u32),
    /// Server: `assignment_failed`.
    AssignmentFailed(u8),
    /// Server: `kernel_finished` with this (masked) return code.
    KernelFinished(u32),
    /// Drain the next time into a buffer of this length.
    SmallBuffer(u16),
    /// Answer an outstanding action the way a well-behaved transport and peer would
    /// (completion, reply, allocation, kernel result; immediate and length as given).
    Complete(u16, u32, u32),
}

/// One of the eight work errors.
pub fn work_error(e: u8) -> WorkError {
    [
        WorkError::LocalLength,
        WorkError::LocalProtection,
        WorkError::Flushed,
        WorkError::RemoteAccess,
        WorkError::RemoteInvalidRequest,
        WorkError::RnrRetryExceeded,
        WorkError::RetryExceeded,
        WorkError::Other,
    ][usize::from(e % 8)]
}

/// A return code from any `u32` (masked to 24 bits).
pub fn return_code(raw: u32) -> ReturnCode {
    ReturnCode::new(raw & ReturnCode::MAX_VALUE).unwrap_or(ReturnCode::SUCCESS)
}

/// Builds a client region table from (address, rkey, size, flag selector) parameters;
/// selectors below 0xF0 pick one of [`VALID_FLAGS`], higher ones are raw (possibly odd) flag
/// bits. Adds `internal % 4` internal regions and the address offset.
pub fn table_from(params: &[(u64, u32, u64, u8)], internal: u8, offset: u64) -> ClientRegions {
    let mut t = ClientRegions::new();
    for &(addr, rkey, size, sel) in params {
        let Ok(id) = t.add_param(addr, rkey, size) else {
            continue;
        };
        let bits = if sel >= 0xF0 {
            sel
        } else {
            VALID_FLAGS[usize::from(sel) % VALID_FLAGS.len()]
        };
        if bits & 0x04 != 0 {
            let _ = t.set_input(id);
        }
        if bits & 0x08 != 0 {
            let _ = t.set_output(id);
        }
        if bits & 0x02 != 0 {
            let _ = t.set_single_send(id);
        }
    }
    for i in 0..(internal % 4) {
        let _ = t.add_internal(u64::from(i) * 5000 + 1);
    }
    t.set_addr_offset(offset);
    t
}

/// The bytes of a payload; `params` are the client's parameter sizes for
/// [`Payload::MatchingAdvert`].
pub fn payload_bytes(p: &Payload, params: &[u32]) -> Vec<u8> {
    let mut buf = vec![0u8; MRSP_RECV_LEN];
    let len = match p {
        Payload::Bytes(b) => return b.clone(),
        Payload::Error(code, pad) => return vec![0x00, *code, pad[0], pad[1]],
        Payload::MatchingAdvert(addr, rkey, extra) => {
            let recs = params.iter().enumerate().map(|(i, &size)| AdvertRecord {
                addr: addr.wrapping_add(i as u64 * 0x1_0000) & 0x0000_FFFF_FFFF_FFFF,
                rkey: rkey.wrapping_add(i as u32),
                size: size.saturating_add(u32::from(*extra % 4)),
            });
            mrsp::emit_advertise(&mut buf, recs)
        }
        Payload::TableRequest(regions, internal, offset) => {
            let params: Vec<_> = regions
                .iter()
                .map(|&(sel, size)| (0x7F00_0000_0000, 0x1000, u64::from(size % 100_000), sel))
                .collect();
            let t = table_from(&params, *internal, *offset);
            t.records()
                .map_err(|_| crate::wire::Error::AddressTooLarge)
                .and_then(|r| mrsp::emit_advertise_request(&mut buf, r))
        }
    };
    match len {
        Ok(len) => buf[..len].to_vec(),
        Err(_) => Vec::new(),
    }
}

/// The clock, the ids a machine handed out and its unanswered actions.
#[derive(Debug)]
pub struct Harness<A> {
    /// The virtual clock.
    pub now: Instant,
    /// Every work-request id the machine posted.
    pub seen: Vec<WrId>,
    /// Actions not answered yet (for [`Op::Complete`]).
    pub outstanding: Vec<A>,
    /// Length of the buffer for the next drain.
    pub buf_len: usize,
}

impl<A: MachineAction> Default for Harness<A> {
    fn default() -> Self {
        Self {
            now: Instant::ZERO,
            seen: Vec::new(),
            outstanding: Vec::new(),
            buf_len: MRSP_RECV_LEN,
        }
    }
}

impl<A: MachineAction> Harness<A> {
    /// The work-request id `id` stands for.
    pub fn wr_id(&self, id: Id) -> WrId {
        match id {
            Id::Seen(i) if !self.seen.is_empty() => self.seen[usize::from(i) % self.seen.len()],
            Id::Seen(i) => WrId::from_raw(u64::from(i)),
            Id::Shaped(kind, index) => {
                WrId::from_raw((u64::from(kind % 8) << 32) | u64::from(index))
            }
            Id::Raw(raw) => WrId::from_raw(raw),
        }
    }

    /// Removes and returns outstanding action `i` (modulo their number).
    pub fn take_outstanding(&mut self, i: u16) -> Option<A> {
        if self.outstanding.is_empty() {
            return None;
        }
        let i = usize::from(i) % self.outstanding.len();
        Some(self.outstanding.remove(i))
    }

    /// Drains `m`; panics unless it stops within [`DRAIN_BOUND`] actions and every SEND
    /// fits the buffer and is a valid MRSP message.
    pub fn drain<M: Machine<Action = A>>(&mut self, m: &mut M) {
        let mut buf = vec![0u8; self.buf_len];
        self.buf_len = MRSP_RECV_LEN;
        for _ in 0..DRAIN_BOUND {
            let Some(action) = m.poll_action(&mut buf) else {
                return;
            };
            if let Some(Post::Send { len, .. }) = action.post() {
                assert!(
                    len <= buf.len(),
                    "Send of {len} bytes from a {}-byte buffer",
                    buf.len()
                );
                if let Err(e) = Repr::parse(&buf[..len]) {
                    panic!(
                        "the machine sent an invalid MRSP message ({e:?}): {:02x?}",
                        &buf[..len]
                    );
                }
            }
            if let Some(post) = action.post() {
                self.seen.push(post.wr_id());
            }
            self.outstanding.push(action);
        }
        panic!("poll_action did not drain within {DRAIN_BOUND} actions");
    }

    /// Applies the role-independent operations (inputs, clock); false for the others.
    pub(crate) fn apply<M: Machine<Action = A>>(
        &mut self,
        m: &mut M,
        op: &Op,
        params: &[u32],
    ) -> bool {
        let now = self.now;
        let input = match *op {
            Op::AddressResolved => Input::AddressResolved,
            Op::Established => Input::Established,
            Op::Disconnected => Input::Disconnected,
            Op::SendCompleted(i) => Input::SendCompleted(self.wr_id(i)),
            Op::WriteCompleted(i) => Input::WriteCompleted(self.wr_id(i)),
            Op::Received(i, ref p) => {
                let data = payload_bytes(p, params);
                m.handle_input(
                    now,
                    Input::Received {
                        wr_id: self.wr_id(i),
                        data: &data,
                    },
                );
                return true;
            }
            Op::WriteImm(i, imm, len) => Input::WriteImmReceived {
                wr_id: self.wr_id(i),
                imm,
                len,
            },
            Op::WorkFailed(i, e) => Input::WorkFailed {
                wr_id: self.wr_id(i),
                error: work_error(e),
            },
            Op::PostFailed(i) => Input::PostFailed(self.wr_id(i)),
            Op::Advance(us) => {
                self.now = Instant::from_micros(self.now.as_micros().saturating_add(us));
                m.handle_timeout(self.now);
                return true;
            }
            Op::FireTimeout => {
                if let Some(t) = m.poll_timeout() {
                    self.now = self.now.max(t);
                    m.handle_timeout(self.now);
                }
                return true;
            }
            Op::SmallBuffer(len) => {
                self.buf_len = usize::from(len);
                return true;
            }
            _ => return false,
        };
        m.handle_input(now, input);
        true
    }

    /// Answers a posted work request the way the transport would: send and write
    /// completions; `recv` builds the input for a consumed receive.
    pub(crate) fn complete_post<M: Machine<Action = A>>(
        &mut self,
        m: &mut M,
        post: Post,
        recv: impl FnOnce(WrId, RecvBuffer) -> Option<(WrId, Vec<u8>, u32)>,
        imm: u32,
        len: u32,
    ) {
        let now = self.now;
        match post {
            Post::Send { wr_id, .. } => m.handle_input(now, Input::SendCompleted(wr_id)),
            Post::Write(w) => m.handle_input(now, Input::WriteCompleted(w.wr_id)),
            Post::Recv {
                wr_id,
                buffer: RecvBuffer::Empty,
            } => {
                m.handle_input(now, Input::WriteImmReceived { wr_id, imm, len });
            }
            Post::Recv { wr_id, buffer } => {
                if let Some((wr_id, data, _)) = recv(wr_id, buffer) {
                    m.handle_input(now, Input::Received { wr_id, data: &data });
                }
            }
        }
    }
}

/// The arguments of [`Op::StartRpc`] on `c`.
pub fn rpc_args(c: &Client, args: Option<(u32, [u8; 3], u8)>) -> RpcArgs {
    match args {
        None => c.config().rpc_args(),
        Some((us, user, code)) => RpcArgs {
            fncode: FunctionCode::new(code % 127 + 1).unwrap_or(c.config().fncode),
            user,
            timeout: Duration::from_micros(u64::from(us)),
        },
    }
}
