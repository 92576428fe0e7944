//! The receive side's I/O object: the receive buffer (headers and small payloads) and the
//! placement of a payload into registered memory, chunk by chunk through the buffer's access
//! gate. What the buffer already holds of a payload is copied from it; the rest is read from
//! the socket straight into the region, with the buffer behind it in the same read for what
//! follows the payload. After a payload above [`SMALL_READ`] the next read of an empty buffer
//! takes at most [`PROBE`] bytes, so that a header of the same kind leaves its payload in the
//! socket to be read into its region. It knows nothing of the protocol; whoever holds it reads
//! the socket (see `queue_pair::ReadSlot`).

use std::io::{self, IoSliceMut};

use super::frame::{Frame, HDR_LEN};
use super::socket::Socket;
use crate::transport::regions::Local;

/// Size of the receive buffer.
pub(crate) const RX_BUF: usize = 64 * 1024;
/// Payloads up to this size may be read whole into the receive buffer (and copied from it);
/// larger ones are placed from the socket straight away (see `receive::drive`), and make the
/// next read of an empty buffer a probe.
pub(crate) const SMALL_READ: usize = 16 * 1024;
/// Most bytes read into an empty buffer after a payload above [`SMALL_READ`]: room for a few
/// headers, while most of a payload that follows stays in the socket for its region.
pub(crate) const PROBE: usize = 1024;

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
    /// The last payload placed was above [`SMALL_READ`]: read an empty buffer by [`PROBE`].
    expect_large: bool,
    /// Payload bytes copied from the buffer into regions (tests tell copies from direct reads).
    #[cfg(test)]
    pub(crate) copied: usize,
}

impl Reader {
    /// A fresh reader.
    pub(crate) fn new() -> Self {
        Self {
            buf: vec![0; RX_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            placing: None,
            expect_large: false,
            #[cfg(test)]
            copied: 0,
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

    /// True while a payload of at most `len` bytes is being placed.
    pub(crate) fn placing_within(&self, len: usize) -> bool {
        self.placing.as_ref().is_some_and(|p| p.local.len <= len)
    }

    /// How many bytes should have arrived before the next read (the socket's read mark, see
    /// [`Socket::set_read_mark`]): while a payload is read from the socket straight into its
    /// region, the rest of it up to `chunk` (so that a payload streaming in wakes its reader
    /// once per chunk, not once per TCP segment); otherwise 1, since a header may be all that
    /// comes.
    pub(crate) fn read_mark(&self, chunk: usize) -> usize {
        match &self.placing {
            Some(p) if self.buffered() == 0 && p.local.len - p.done > SMALL_READ => {
                (p.local.len - p.done).min(chunk)
            }
            _ => 1,
        }
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

    /// One non-blocking read into the free end of the buffer (compacting it first if needed;
    /// at most [`PROBE`] bytes into an empty buffer while large payloads come).
    pub(crate) fn fill(&mut self, socket: &Socket) -> Step {
        self.read_into_buffer(socket, false)
    }

    /// Like [`Reader::fill`], sleeping in the receive until input arrives or the socket's
    /// receive timeout passes (`WouldBlock`).
    pub(crate) fn fill_wait(&mut self, socket: &Socket) -> Step {
        self.read_into_buffer(socket, true)
    }

    fn read_into_buffer(&mut self, socket: &Socket, wait: bool) -> Step {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() || self.buf.len() - self.start < HDR_LEN {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            // Full of unprocessed input (a read into nothing would look like end of stream).
            return Step::WouldBlock;
        }
        let limit = if self.expect_large && self.end == 0 {
            PROBE
        } else {
            self.buf.len()
        };
        let dst = &mut self.buf[self.end..limit];
        let got = if wait {
            socket.recv_wait(dst)
        } else {
            socket.recv(dst)
        };
        match read_step(got) {
            (Step::Progress, n) => {
                self.end += n;
                Step::Progress
            }
            (step, _) => step,
        }
    }

    /// Discards what is buffered (input ignored after an injected fault).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn discard(&mut self) {
        self.start = self.end;
    }

    /// Starts placing a payload into `local`.
    pub(crate) fn start_placement(&mut self, local: Local) {
        self.expect_large = local.len > SMALL_READ;
        self.placing = Some(Placement { local, done: 0 });
    }

    /// One step of the placement: copies what the buffer holds, or reads once (at most
    /// `chunk` bytes into the target, one access of it through its gate; the read that can
    /// end the payload also takes what follows it into the emptied buffer).
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
            #[cfg(test)]
            {
                self.copied += n;
            }
            return self.progress();
        }
        self.start = 0;
        self.end = 0;
        let want = left.min(chunk);
        // Only the read that ends the payload reads on into the buffer (what follows it): a
        // middle chunk leaves the rest of the payload in the socket for the region.
        let behind: &mut [u8] = if want == left { &mut self.buf } else { &mut [] };
        let Ok(got) = p.local.buffer.nic_write(at, want, |dst| {
            let mut into = [IoSliceMut::new(dst), IoSliceMut::new(behind)];
            socket.recv_vectored(&mut into)
        }) else {
            self.placing = None;
            return Step::Inaccessible;
        };
        match read_step(got) {
            (Step::Progress, n) => {
                p.done += n.min(want);
                self.end = n.saturating_sub(want);
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::Duration;

    use super::*;
    use crate::memory::Buffer;
    use crate::transport::soft::socket::Interest;
    use crate::transport::soft::socket::tests::pair;

    fn wait_input(socket: &Socket) {
        let read = Interest {
            read: true,
            ..Interest::default()
        };
        assert!(socket.wait(read, Some(Duration::from_secs(10))), "no input");
    }

    /// The next header, read as it comes.
    fn next_header(r: &mut Reader, socket: &Socket) -> Frame {
        loop {
            if let Some(h) = r.next_frame() {
                return h.unwrap();
            }
            match r.fill(socket) {
                Step::Progress => {}
                Step::WouldBlock => wait_input(socket),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    /// Places the payload of `len` bytes into a fresh zeroed buffer, step by step, and checks
    /// that no step but the last delivers the payload's last byte (the step that completes it
    /// says `Placed`, so nobody waits for input that is not coming).
    fn place_all(r: &mut Reader, socket: &Socket, len: usize) -> Vec<u8> {
        let buffer = Buffer::zeroed(len);
        r.start_placement(Local {
            buffer: buffer.clone(),
            offset: 0,
            len,
        });
        loop {
            match r.place(socket, 64 * 1024) {
                Step::Placed => break,
                Step::Progress => {
                    assert!(r.is_placing());
                    assert_eq!(
                        buffer.lock()[len - 1],
                        0,
                        "the last byte came with a Progress"
                    );
                }
                Step::WouldBlock => wait_input(socket),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(!r.is_placing());
        buffer.lock().to_vec()
    }

    #[test]
    fn a_placement_ends_with_the_step_that_delivers_its_last_byte() {
        let (mut peer, socket) = pair();
        // A small payload that arrives with its header (copied from the receive buffer), then
        // one larger than the buffer (mostly read from the socket straight into the target).
        let small: Vec<u8> = (0..100u32).map(|i| (i % 251) as u8 | 1).collect();
        let large: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8 | 1).collect();
        let frame = |len: usize| {
            Frame::Send {
                len: len as u32,
                solicited: false,
            }
            .encode()
        };
        let mut wire = frame(small.len()).to_vec();
        wire.extend_from_slice(&small);
        wire.extend_from_slice(&frame(large.len()));
        wire.extend_from_slice(&large);
        let writer = std::thread::spawn(move || peer.write_all(&wire).map(|()| peer));

        let mut r = Reader::new();
        for (payload, name) in [(&small, "small"), (&large, "large")] {
            let header = next_header(&mut r, &socket);
            assert_eq!(header, Frame::decode(&frame(payload.len())).unwrap());
            assert!(
                place_all(&mut r, &socket, payload.len()) == *payload,
                "{name} payload"
            );
        }
        assert_eq!(r.buffered(), 0);
        drop(writer.join().unwrap().unwrap());
    }

    /// While a large payload streams in, the mark asks for the rest of it up to a chunk (so
    /// its reader is not woken per segment); with a header or a small rest to come, any byte.
    #[test]
    fn the_read_mark_follows_the_placement() {
        const CHUNK: usize = 64 * 1024;
        let (mut peer, socket) = pair();
        let len = 200_000;
        let payload: Vec<u8> = (0..len as u32).map(|i| (i % 249) as u8).collect();
        let mut r = Reader::new();
        assert_eq!(r.read_mark(CHUNK), 1, "no placement: a header comes next");
        let buffer = Buffer::zeroed(len);
        r.start_placement(Local {
            buffer: buffer.clone(),
            offset: 0,
            len,
        });
        assert_eq!(r.read_mark(CHUNK), CHUNK, "the rest exceeds a chunk");
        // The first 150 000 bytes arrive: placed, 50 000 left (more than SMALL_READ).
        peer.write_all(&payload[..150_000]).unwrap();
        // (The mark is the rest once it is below a chunk: placing until it is 50 000.)
        let mut marks = Vec::new();
        while r.read_mark(CHUNK) != 50_000 {
            marks.push(r.read_mark(CHUNK));
            assert!(marks.len() < 1000, "marks {marks:?}");
            match r.place(&socket, CHUNK) {
                Step::Progress => {}
                Step::WouldBlock => wait_input(&socket),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(marks.iter().all(|&m| m == 1 || m > 50_000), "{marks:?}");
        // Then the last 50 000: placed, and the mark is back at 1.
        peer.write_all(&payload[150_000..]).unwrap();
        loop {
            match r.place(&socket, CHUNK) {
                Step::Placed => break,
                Step::Progress => {}
                Step::WouldBlock => wait_input(&socket),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(r.read_mark(CHUNK), 1);
        assert!(buffer.lock().to_vec() == payload);
    }

    /// After a payload above `SMALL_READ`, the next one (the whole frame already in the
    /// socket) is read into its region: at most a probe's worth of it is copied from the
    /// buffer, and the header that follows comes with its last read.
    #[test]
    fn a_payload_after_a_large_one_is_read_into_its_region() {
        let (mut peer, socket) = pair();
        let len = 40_000;
        let payloads: Vec<Vec<u8>> = (0..2u32)
            .map(|k| (0..len as u32).map(|i| ((i + k) % 247) as u8 | 1).collect())
            .collect();
        let frame = |len: usize| {
            Frame::Send {
                len: len as u32,
                solicited: false,
            }
            .encode()
        };
        let mut r = Reader::new();
        for (k, payload) in payloads.iter().enumerate() {
            // The frame, and the header of one more: all in our socket before we read.
            let mut wire = frame(len).to_vec();
            wire.extend_from_slice(payload);
            wire.extend_from_slice(&frame(0));
            peer.write_all(&wire).unwrap();
            socket.set_read_mark(wire.len());
            wait_input(&socket);
            socket.set_read_mark(1);
            let copied = r.copied;
            let header = next_header(&mut r, &socket);
            assert_eq!(header, Frame::decode(&frame(len)).unwrap());
            assert!(place_all(&mut r, &socket, len) == *payload, "payload {k}");
            if k == 1 {
                assert!(
                    r.copied - copied <= PROBE,
                    "{} bytes copied through the buffer",
                    r.copied - copied
                );
            }
            assert!(
                matches!(r.next_frame(), Some(Ok(Frame::Send { len: 0, .. }))),
                "the next header was not read with the payload"
            );
        }
        // A payload of many chunks: its middle reads leave the rest of it in the socket (for
        // the region), not in the buffer.
        let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 241) as u8 | 1).collect();
        let mut wire = frame(big.len()).to_vec();
        wire.extend_from_slice(&big);
        let writer = std::thread::spawn(move || peer.write_all(&wire).map(|()| peer));
        let copied = r.copied;
        let header = next_header(&mut r, &socket);
        assert_eq!(header, Frame::decode(&frame(big.len())).unwrap());
        assert!(place_all(&mut r, &socket, big.len()) == big, "many chunks");
        assert!(
            r.copied - copied <= PROBE,
            "{} bytes of many chunks copied through the buffer",
            r.copied - copied
        );
        drop(writer.join().unwrap().unwrap());
    }
}
