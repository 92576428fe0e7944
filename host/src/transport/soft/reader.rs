//! The receive side's I/O object: the receive buffer (headers and small payloads) and the
//! placement of a payload into registered memory, chunk by chunk through the buffer's access
//! gate (small remainders are copied from the receive buffer, large ones read from the socket
//! straight into the region). It knows nothing of the protocol; whoever holds it reads the
//! socket (see `queue_pair::ReadSlot`).

use std::io;

use super::frame::{Frame, HDR_LEN};
use super::regions::Local;
use super::socket::Socket;

/// Size of the receive buffer.
pub(crate) const RX_BUF: usize = 64 * 1024;
/// Payload remainders up to this size are read through the receive buffer (so that the next
/// header comes with them) rather than straight into the region.
const SMALL_READ: usize = 16 * 1024;

/// Outcome of one step of reading or placing.
#[derive(Debug)]
pub(crate) enum Step {
    /// Bytes arrived (or were placed).
    Progress,
    /// Nothing has arrived.
    WouldBlock,
    /// The placement finished.
    Placed,
    /// The target memory became inaccessible (the application holds it).
    Inaccessible,
    /// End of stream or a socket error.
    Gone,
}

/// A payload being placed.
#[derive(Debug)]
struct Placement {
    local: Local,
    done: usize,
}

/// The receive buffer and its cursor, plus the payload being placed.
#[derive(Debug)]
pub(crate) struct Reader {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    placing: Option<Placement>,
}

impl Reader {
    /// A fresh reader.
    pub(crate) fn new() -> Self {
        Self {
            buf: vec![0; RX_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            placing: None,
        }
    }

    /// Bytes buffered and not consumed.
    pub(crate) fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// True while a payload is being placed.
    pub(crate) fn is_placing(&self) -> bool {
        self.placing.is_some()
    }

    /// The next buffered header, decoded and consumed (`None`: not complete yet).
    pub(crate) fn next_frame(&mut self) -> Option<Result<Frame, &'static str>> {
        let frame = self.peek()?;
        if frame.is_ok() {
            self.start += HDR_LEN;
        }
        Some(frame)
    }

    /// The next buffered header, decoded, not consumed.
    pub(crate) fn peek(&self) -> Option<Result<Frame, &'static str>> {
        let raw: &[u8; HDR_LEN] = self
            .buf
            .get(self.start..self.start + HDR_LEN)?
            .try_into()
            .ok()?;
        (self.buffered() >= HDR_LEN).then(|| Frame::decode(raw))
    }

    /// One non-blocking read into the free end of the buffer (compacting it first if needed).
    pub(crate) fn fill(&mut self, socket: &Socket) -> Step {
        if self.end == self.buf.len() || self.buf.len() - self.start < HDR_LEN {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            // Full of unprocessed input (a read into nothing would look like end of stream).
            return Step::WouldBlock;
        }
        let got = socket.recv(&mut self.buf[self.end..]);
        match read_step(got) {
            (Step::Progress, n) => {
                self.end += n;
                Step::Progress
            }
            (step, _) => step,
        }
    }

    /// Starts placing a payload into `local`.
    pub(crate) fn start_placement(&mut self, local: Local) {
        self.placing = Some(Placement { local, done: 0 });
    }

    /// One step of the placement: copies what the buffer holds, or reads once (at most
    /// `chunk` bytes, one access of the target through its gate).
    pub(crate) fn place(&mut self, socket: &Socket, chunk: usize) -> Step {
        let Some(p) = &mut self.placing else {
            return Step::Placed;
        };
        let left = p.local.len - p.done;
        if left == 0 {
            self.placing = None;
            return Step::Placed;
        }
        let at = p.local.offset + p.done;
        let avail = self.end - self.start;
        if avail > 0 {
            let n = avail.min(left).min(chunk);
            let src = &self.buf[self.start..self.start + n];
            if p.local
                .buffer
                .nic_write(at, n, |dst| dst.copy_from_slice(src))
                .is_err()
            {
                self.placing = None;
                return Step::Inaccessible;
            }
            self.start += n;
            p.done += n;
            return self.progress();
        }
        if left <= SMALL_READ {
            self.start = 0;
            self.end = 0;
            return self.fill(socket);
        }
        let want = left.min(chunk);
        let Ok(got) = p.local.buffer.nic_write(at, want, |dst| socket.recv(dst)) else {
            self.placing = None;
            return Step::Inaccessible;
        };
        match read_step(got) {
            (Step::Progress, n) => {
                p.done += n;
                self.progress()
            }
            (step, _) => step,
        }
    }

    /// `Placed` (and the placement ended) if the payload is complete, else `Progress`.
    fn progress(&mut self) -> Step {
        match &self.placing {
            Some(p) if p.done == p.local.len => {
                self.placing = None;
                Step::Placed
            }
            _ => Step::Progress,
        }
    }
}

/// Classifies the result of one receive.
fn read_step(got: io::Result<usize>) -> (Step, usize) {
    match got {
        Ok(0) => (Step::Gone, 0),
        Ok(n) => (Step::Progress, n),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => (Step::Progress, 0),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => (Step::WouldBlock, 0),
        Err(e) => {
            tracing::debug!(error = %e, "soft transport: receive failed");
            (Step::Gone, 0)
        }
    }
}
