//! Shared by the machine targets: operations decoded from the fuzz input and a harness that
//! drains actions with a bound and checks every sent message.

#![allow(dead_code)]

use arbitrary::Arbitrary;
use naaice_core::config::MRSP_RECV_LEN;
use naaice_core::machine::{RecvBuffer, WorkError, WrId};
use naaice_core::wire::mrsp::{self, AdvertRecord, Repr};
use naaice_core::{Action, ClientRegions, Instant};

/// Most actions one drain may produce before the machine is considered stuck.
pub const DRAIN_BOUND: usize = 1000;

/// The flag bytes the C client produces (spec §2.4).
pub const VALID_FLAGS: [u8; 7] = [0x00, 0x01, 0x04, 0x06, 0x08, 0x0C, 0x0E];

/// Where a work-request id comes from.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Id {
    /// One the machine handed out earlier (index modulo the number seen).
    Seen(u8),
    /// kind << 32 | index, with small values.
    Shaped(u8, u8),
    /// Anything.
    Raw(u64),
}

/// What a received SEND carries.
#[derive(Arbitrary, Debug, Clone)]
pub enum Payload {
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// An Advertisement that fits the client's parameters (address, rkey, extra size).
    MatchingAdvert(u64, u32, u8),
    /// An Advertisement+Request built from a region table (flag selector, size) and offset.
    TableRequest(Vec<(u8, u32)>, u8, u64),
    /// An Error message with this code byte.
    Error(u8, [u8; 2]),
}

/// One step of a fuzz run.
#[derive(Arbitrary, Debug, Clone)]
pub enum Op {
    AddressResolved,
    Established,
    Disconnected,
    SendCompleted(Id),
    WriteCompleted(Id),
    Received(Id, Payload),
    WriteImm(Id, u32, u32),
    WorkFailed(Id, u8),
    PostFailed(Id),
    /// Advance the clock and call `handle_timeout`.
    Advance(u64),
    /// Jump to the machine's deadline and call `handle_timeout`.
    FireTimeout,
    StartMrsp,
    StartRpc(Option<u32>),
    SetUserBytes([u8; 3]),
    SetBytesToSend(u8, Option<u32>),
    RegionAssigned(Option<u8>, u64, u32),
    AssignmentFailed(u8),
    KernelFinished(u32),
    /// Drain the next time into a buffer of this length.
    SmallBuffer(u16),
    /// Answer an outstanding action the way a well-behaved peer would.
    Complete(u8, u32, u32),
}

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

/// Builds a client region table; flag selectors ≥ 0xF0 set raw (possibly odd) combinations.
pub fn table_from(params: &[(u64, u32, u32, u8)], internal: u8, offset: u64) -> ClientRegions {
    let mut t = ClientRegions::new();
    for &(addr, rkey, size, sel) in params {
        let Ok(id) = t.add_param(addr, rkey, u64::from(size)) else {
            continue;
        };
        let bits = if sel >= 0xF0 {
            sel
        } else {
            VALID_FLAGS[usize::from(sel) % 7]
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

/// The bytes of a payload; `params` are the client's parameter sizes for `MatchingAdvert`.
pub fn payload_bytes(p: &Payload, params: &[u32]) -> Vec<u8> {
    let mut buf = vec![0u8; MRSP_RECV_LEN];
    match p {
        Payload::Bytes(b) => b.clone(),
        Payload::MatchingAdvert(addr, rkey, extra) => {
            let recs = params.iter().enumerate().map(|(i, &size)| AdvertRecord {
                addr: addr.wrapping_add(i as u64 * 0x1_0000) & 0x0000_FFFF_FFFF_FFFF,
                rkey: rkey.wrapping_add(i as u32),
                size: size.saturating_add(u32::from(*extra % 4)),
            });
            let recs: Vec<_> = recs.collect();
            match mrsp::emit_advertise(&mut buf, recs.into_iter()) {
                Ok(len) => buf[..len].to_vec(),
                Err(_) => Vec::new(),
            }
        }
        Payload::TableRequest(regions, internal, offset) => {
            let params: Vec<_> = regions
                .iter()
                .map(|&(sel, size)| (0x7F00_0000_0000, 0x1000, size % 100_000, sel))
                .collect();
            let t = table_from(&params, *internal, *offset);
            match t
                .records()
                .map(|r| mrsp::emit_advertise_request(&mut buf, r))
            {
                Ok(Ok(len)) => buf[..len].to_vec(),
                _ => Vec::new(),
            }
        }
        Payload::Error(code, pad) => vec![0x00, *code, pad[0], pad[1]],
    }
}

/// The clock, the ids a machine handed out and its unanswered actions.
pub struct Harness {
    pub now: Instant,
    pub seen: Vec<WrId>,
    pub outstanding: Vec<Action>,
    pub buf_len: usize,
}

impl Harness {
    pub fn new() -> Self {
        Self {
            now: Instant::ZERO,
            seen: Vec::new(),
            outstanding: Vec::new(),
            buf_len: MRSP_RECV_LEN,
        }
    }

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

    pub fn take_outstanding(&mut self, i: u8) -> Option<Action> {
        if self.outstanding.is_empty() {
            return None;
        }
        Some(
            self.outstanding
                .remove(usize::from(i) % self.outstanding.len()),
        )
    }

    pub fn advance(&mut self, micros: u64) {
        self.now = Instant::from_micros(self.now.as_micros().saturating_add(micros));
    }

    /// Drains `poll`, asserting that it stops within [`DRAIN_BOUND`] actions and that every
    /// Send fits the buffer and is a valid MRSP message.
    pub fn drain(&mut self, mut poll: impl FnMut(&mut [u8]) -> Option<Action>) {
        let mut buf = vec![0u8; self.buf_len];
        self.buf_len = MRSP_RECV_LEN;
        for _ in 0..DRAIN_BOUND {
            let Some(action) = poll(&mut buf) else { return };
            match action {
                Action::PostRecv { wr_id, .. } => self.seen.push(wr_id),
                Action::Send { wr_id, len } => {
                    assert!(
                        len <= buf.len(),
                        "Send of {len} bytes from a {}-byte buffer",
                        buf.len()
                    );
                    if let Err(e) = Repr::parse(&buf[..len]) {
                        panic!(
                            "machine sent an invalid MRSP message ({e:?}): {:02x?}",
                            &buf[..len]
                        );
                    }
                    self.seen.push(wr_id);
                }
                Action::Write(w) => self.seen.push(w.wr_id),
                _ => {}
            }
            if matches!(
                action,
                Action::PostRecv { .. }
                    | Action::Send { .. }
                    | Action::Write(_)
                    | Action::Allocate { .. }
                    | Action::RunKernel(_)
            ) {
                self.outstanding.push(action);
            }
        }
        panic!("poll_action did not drain within {DRAIN_BOUND} actions");
    }
}

/// True for an outstanding receive of the message buffer.
pub fn is_message_recv(a: &Action) -> bool {
    matches!(
        a,
        Action::PostRecv {
            buffer: RecvBuffer::Message,
            ..
        }
    )
}
