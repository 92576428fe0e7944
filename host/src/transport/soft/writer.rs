//! The transmit side's I/O object: the frames being written (control frames, and at most one
//! data frame whose payload is streamed from registered memory, one chunk per access through
//! the buffer's gate), with what of them is already on the wire. Control frames and the next
//! data frame go out together in one system call. Whoever holds the writer writes the socket
//! (see `queue_pair`), so frames never interleave; a frame cut off by teardown leaves the
//! writer *torn*, and nothing may follow it.

use std::io::IoSlice;
use std::time::Instant;

use super::engine::{Engine, Transmit};
use super::frame::HDR_LEN;
use super::regions::Local;
use super::socket::{Socket, transient};

/// Most control frames batched ahead of a data frame.
const CTRL_FRAMES: usize = 4;

/// A data frame being written.
#[derive(Debug)]
struct Outgoing {
    msn: u64,
    hdr: [u8; HDR_LEN],
    local: Option<Local>,
    /// Frame bytes (header and payload) already written.
    sent: usize,
}

impl Outgoing {
    fn total(&self) -> usize {
        HDR_LEN + self.local.as_ref().map_or(0, |l| l.len)
    }
}

/// Outcome of one write.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wrote {
    /// Bytes went out; `Some(msn)` if data message `msn` is now complete.
    Progress(Option<u64>),
    /// The send buffer is full.
    WouldBlock,
    /// The payload of message `msn` became inaccessible (the application holds it).
    Inaccessible(u64),
    /// The socket failed.
    Failed,
}

/// Frames in the course of being written.
#[derive(Debug)]
pub(crate) struct Writer {
    ctrl: [u8; CTRL_FRAMES * HDR_LEN],
    ctrl_len: usize,
    ctrl_sent: usize,
    data: Option<Outgoing>,
    torn: bool,
    /// When a byte last went out (or the writer last had nothing to do).
    last_progress: Instant,
    /// Bytes written so far (all frames; for write budgets).
    written: u64,
}

impl Writer {
    /// An idle writer.
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            ctrl: [0; CTRL_FRAMES * HDR_LEN],
            ctrl_len: 0,
            ctrl_sent: 0,
            data: None,
            torn: false,
            last_progress: now,
            written: 0,
        }
    }

    /// Bytes written to the socket so far (a thread's write budget is measured with it).
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// True if bytes are waiting to be written.
    pub(crate) fn has_work(&self) -> bool {
        !self.torn && (self.ctrl_sent < self.ctrl_len || self.data.is_some())
    }

    /// True if frames were cut off (teardown in the middle of a frame, or a failed socket):
    /// nothing more can be written.
    pub(crate) fn is_torn(&self) -> bool {
        self.torn
    }

    /// When the writer last made progress (for the stall timeout while it has work).
    pub(crate) fn last_progress(&self) -> Instant {
        self.last_progress
    }

    /// Takes frames from `engine` unless a data frame is still being written: control frames,
    /// then one data frame with a payload of at most `max_payload`. After teardown a data
    /// frame not started yet is dropped, and one partly written tears the writer.
    pub(crate) fn refill(&mut self, engine: &mut Engine, now: Instant, max_payload: usize) {
        if engine.is_closed()
            && let Some(d) = &self.data
        {
            if d.sent > 0 {
                self.torn = true;
            }
            self.data = None;
        }
        if self.torn || self.data.is_some() {
            return;
        }
        if self.ctrl_sent == self.ctrl_len {
            self.ctrl_len = 0;
            self.ctrl_sent = 0;
            self.last_progress = now;
        }
        while self.ctrl_len + HDR_LEN <= self.ctrl.len() {
            match engine.poll_transmit(now, max_payload) {
                None => return,
                Some(Transmit::Control(frame)) => {
                    self.ctrl[self.ctrl_len..self.ctrl_len + HDR_LEN]
                        .copy_from_slice(&frame.encode());
                    self.ctrl_len += HDR_LEN;
                }
                Some(Transmit::Data { msn, frame, local }) => {
                    self.data = Some(Outgoing {
                        msn,
                        hdr: frame.encode(),
                        local,
                        sent: 0,
                    });
                    return;
                }
            }
        }
    }

    /// One non-blocking write: pending control bytes, then the data frame's header and up to
    /// `chunk` payload bytes.
    pub(crate) fn write(&mut self, socket: &Socket, chunk: usize, now: Instant) -> Wrote {
        let ctrl = &self.ctrl[self.ctrl_sent..self.ctrl_len];
        let result = match &self.data {
            None => Ok(socket.send(&[IoSlice::new(ctrl)])),
            Some(d) => {
                let hdr = &d.hdr[d.sent.min(HDR_LEN)..];
                match &d.local {
                    Some(l) if l.len > 0 => {
                        let done = d.sent.saturating_sub(HDR_LEN);
                        let len = (l.len - done).min(chunk);
                        l.buffer.nic_read(l.offset + done, len, |payload| {
                            let bufs =
                                [IoSlice::new(ctrl), IoSlice::new(hdr), IoSlice::new(payload)];
                            socket.send(&bufs)
                        })
                    }
                    _ => Ok(socket.send(&[IoSlice::new(ctrl), IoSlice::new(hdr)])),
                }
            }
        };
        let mut n = match result {
            Ok(Ok(n)) => n,
            Ok(Err(e)) if transient(&e) => return Wrote::WouldBlock,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "soft transport: send failed");
                // Nothing can follow on a failed socket.
                self.torn = true;
                return Wrote::Failed;
            }
            Err(_) => {
                let msn = self.data.as_ref().map_or(0, |d| d.msn);
                // Whatever was written of this frame stays cut off.
                self.torn = self.data.as_ref().is_some_and(|d| d.sent > 0);
                self.data = None;
                return Wrote::Inaccessible(msn);
            }
        };
        self.last_progress = now;
        self.written += n as u64;
        let c = n.min(self.ctrl_len - self.ctrl_sent);
        self.ctrl_sent += c;
        n -= c;
        let mut finished = None;
        if let Some(d) = &mut self.data {
            d.sent += n;
            if d.sent == d.total() {
                finished = Some(d.msn);
                self.data = None;
            }
        }
        Wrote::Progress(finished)
    }
}
