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
use super::socket::{Socket, transient};
use super::splice::SplicePipe;
use crate::transport::regions::Local;

/// Most control frames batched ahead of a data frame.
const CTRL_FRAMES: usize = 4;
/// Payloads of at least this size go out from their pages (`splice`), smaller ones are
/// copied. On loopback, splicing made RPCs of 1.2–4 MB 10–20 % faster, but those of
/// 70–240 KB took 1.25–1.65 times as long (a plain C ping-pong was also slower with it at
/// 70 KB), and was even at 360 KB.
pub(crate) const SPLICE_MIN: usize = 320 * 1024;
/// Capacity asked for the pipe of payload pages (one chunk).
const PIPE_CAPACITY: usize = 256 * 1024;
/// Smallest pipe worth splicing through (a user over the pipe quota gets 8 KiB ones): with a
/// smaller one, payloads are copied.
const MIN_PIPE: usize = 64 * 1024;

/// The pipe of payload pages.
#[derive(Debug)]
enum PipeState {
    /// Not made yet.
    Unused,
    /// In use.
    Ready(SplicePipe),
    /// The system refused it: payloads are copied.
    Off,
}

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
    /// The pipe of payload pages.
    pipe: PipeState,
    /// Bytes of the data frame's payload in the pipe, not yet in the socket.
    piped: usize,
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
            pipe: PipeState::Unused,
            piped: 0,
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
    /// `chunk` payload bytes. A payload of at least [`SPLICE_MIN`] bytes goes out from its
    /// pages (the header first, held back to leave with it), whatever of it sits in the pipe
    /// before anything else.
    pub(crate) fn write(&mut self, socket: &Socket, chunk: usize, now: Instant) -> Wrote {
        if self.piped > 0 {
            return self.drain(socket, now);
        }
        let splice = self.payload_to_splice() && self.pipe().is_some();
        if splice && self.ctrl_sent == self.ctrl_len && self.data_header_sent() {
            return self.splice(socket, chunk, now);
        }
        let ctrl = &self.ctrl[self.ctrl_sent..self.ctrl_len];
        let result = match &self.data {
            None => Ok(socket.send(&[IoSlice::new(ctrl)])),
            Some(d) => {
                let hdr = &d.hdr[d.sent.min(HDR_LEN)..];
                match &d.local {
                    Some(l) if l.len > 0 && !splice => {
                        let done = d.sent.saturating_sub(HDR_LEN);
                        let len = (l.len - done).min(chunk);
                        l.buffer.nic_read(l.offset + done, len, |payload| {
                            let bufs =
                                [IoSlice::new(ctrl), IoSlice::new(hdr), IoSlice::new(payload)];
                            socket.send(&bufs)
                        })
                    }
                    // The payload follows from the pipe: the header waits for it, and leaves
                    // only if the payload is accessible (a payload the application holds
                    // fails alone, as on the copying path, instead of tearing the writer).
                    Some(l) if splice => {
                        let done = d.sent.saturating_sub(HDR_LEN);
                        l.buffer.nic_read(l.offset + done, 0, |_| {
                            socket.send_more(&[IoSlice::new(ctrl), IoSlice::new(hdr)])
                        })
                    }
                    _ => Ok(socket.send(&[IoSlice::new(ctrl), IoSlice::new(hdr)])),
                }
            }
        };
        let n = match result {
            Ok(Ok(n)) => n,
            Ok(Err(e)) if transient(&e) => return Wrote::WouldBlock,
            Ok(Err(e)) => return self.fail(&e),
            Err(_) => return self.inaccessible(),
        };
        let wrote = self.sent(n, now);
        if wrote == Wrote::Progress(None)
            && splice
            && self.ctrl_sent == self.ctrl_len
            && self.data_header_sent()
        {
            // The header is out: the payload follows in the same call.
            return self.splice(socket, chunk, now);
        }
        wrote
    }

    /// Payload bytes in the pipe, not yet in the socket (for tests).
    #[cfg(test)]
    pub(crate) fn piped(&self) -> usize {
        self.piped
    }

    /// True if payloads go out through the pipe (for tests).
    #[cfg(test)]
    pub(crate) fn uses_pipe(&self) -> bool {
        matches!(self.pipe, PipeState::Ready(_))
    }

    /// True if the data frame is one to splice and payload bytes of it are still to go.
    fn payload_to_splice(&self) -> bool {
        self.data
            .as_ref()
            .is_some_and(|d| d.total() - HDR_LEN >= SPLICE_MIN && d.sent < d.total())
    }

    /// True if the data frame's header is out.
    fn data_header_sent(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.sent >= HDR_LEN)
    }

    /// The pipe for payload pages, made on first use; `None` if the system refuses one (or
    /// only a small one): payloads are then copied.
    fn pipe(&mut self) -> Option<&SplicePipe> {
        if let PipeState::Unused = self.pipe {
            self.pipe = match SplicePipe::new(PIPE_CAPACITY) {
                Ok(p) if p.capacity() >= MIN_PIPE => PipeState::Ready(p),
                Ok(_) => PipeState::Off,
                Err(e) => {
                    tracing::debug!(error = %e, "soft transport: no pipe, payloads are copied");
                    PipeState::Off
                }
            };
        }
        match &self.pipe {
            PipeState::Ready(p) => Some(p),
            _ => None,
        }
    }

    /// Puts up to `chunk` payload bytes (one access through the buffer's gate) into the pipe,
    /// then moves what the socket takes of them on.
    fn splice(&mut self, socket: &Socket, chunk: usize, now: Instant) -> Wrote {
        let (PipeState::Ready(pipe), Some(d)) = (&self.pipe, &mut self.data) else {
            return Wrote::Progress(None);
        };
        let Some(l) = &d.local else {
            return Wrote::Progress(None);
        };
        let done = d.sent - HDR_LEN;
        let len = (l.len - done).min(chunk);
        match l
            .buffer
            .nic_read(l.offset + done, len, |payload| pipe.map(payload))
        {
            Ok(Ok(n)) if n > 0 => {
                d.sent += n;
                self.piped = n;
                self.drain(socket, now)
            }
            Ok(result) => {
                // vmsplice refused (a seccomp policy, say): nothing was taken, copy instead.
                tracing::debug!(?result, "soft transport: vmsplice, payloads are copied");
                self.pipe = PipeState::Off;
                Wrote::Progress(None)
            }
            Err(_) => self.inaccessible(),
        }
    }

    /// Moves bytes of the pipe into the socket.
    fn drain(&mut self, socket: &Socket, now: Instant) -> Wrote {
        let PipeState::Ready(pipe) = &self.pipe else {
            return self.fail(&std::io::ErrorKind::BrokenPipe.into());
        };
        match socket.nonblocking(|fd| pipe.drain_into(fd, self.piped)) {
            // An empty pipe with bytes owed to the frame cannot be mended.
            Ok(0) => self.fail(&std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                self.piped -= n;
                self.last_progress = now;
                self.written += n as u64;
                Wrote::Progress(self.finish())
            }
            Err(e) if transient(&e) => Wrote::WouldBlock,
            Err(e) => self.fail(&e),
        }
    }

    /// The socket failed: nothing can follow.
    fn fail(&mut self, e: &std::io::Error) -> Wrote {
        tracing::debug!(error = %e, "soft transport: send failed");
        self.torn = true;
        Wrote::Failed
    }

    /// The payload became inaccessible: the data frame is dropped.
    fn inaccessible(&mut self) -> Wrote {
        let msn = self.data.as_ref().map_or(0, |d| d.msn);
        // Whatever was written of this frame stays cut off.
        self.torn = self.data.as_ref().is_some_and(|d| d.sent > 0);
        self.data = None;
        Wrote::Inaccessible(msn)
    }

    /// Accounts `n` bytes sent from the control frames and then the data frame.
    fn sent(&mut self, mut n: usize, now: Instant) -> Wrote {
        self.last_progress = now;
        self.written += n as u64;
        let c = n.min(self.ctrl_len - self.ctrl_sent);
        self.ctrl_sent += c;
        n -= c;
        if let Some(d) = &mut self.data {
            d.sent += n;
        }
        Wrote::Progress(self.finish())
    }

    /// Ends the data frame if all of it is on the wire; returns its message number then.
    fn finish(&mut self) -> Option<u64> {
        match &self.data {
            Some(d) if d.sent == d.total() && self.piped == 0 => {
                let msn = d.msn;
                self.data = None;
                Some(msn)
            }
            _ => None,
        }
    }
}
