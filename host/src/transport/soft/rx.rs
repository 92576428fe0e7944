//! The receive engine, acting like a NIC: it reads frames, validates them against the
//! registered regions and places payload bytes straight into registered memory (small
//! payloads and leftovers from the header read are copied from the receive buffer; everything
//! else is read from the socket directly into the region, chunk by chunk). It consumes posted
//! receives, produces receive completions, handles ACK/NAK for the send queue, and sends
//! cumulative ACKs.
//!
//! Exactly one thread owns the [`Engine`] at a time and reads the socket: the receiver thread
//! (`nic`), or an application thread waiting for a completion (`inline`), which saves the
//! hand-off between the two threads on the latency path.

use std::io::{self, Read};
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::RecvFlags;

use super::frame::{Frame, HDR_LEN};
use super::qp::{Cause, Phase, Shared};
use super::tx::{pump, transient};
use crate::memory::Buffer;
use crate::transport::{Completion, RemoteAddr, WcOpcode, WcStatus};

/// Size of the receive buffer (headers and small payloads).
pub(crate) const RX_BUF: usize = 64 * 1024;
/// Payload remainders up to this size are read through the receive buffer (so that the next
/// header comes with them) rather than straight into the region.
const SMALL_READ: usize = 16 * 1024;

/// How receiving ended (the receiver thread tears the connection down accordingly).
#[derive(Debug)]
pub(crate) enum End {
    /// EOF, reset or DREQ from the peer.
    PeerGone,
    /// The peer broke the protocol.
    Violation(&'static str),
    /// A data message is refused: NAK it with `status` and tear down.
    Refuse(WcStatus),
    /// The connection was already torn down locally (or by a NAK we received).
    Closed,
}

/// The receive buffer and its cursor, handed between the threads that may read the socket.
#[derive(Debug, Default)]
pub(crate) struct Engine {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The read timeout currently set on the socket.
    timeout: Option<Duration>,
    /// Completions were queued since waiters were last woken.
    wake_pending: bool,
    /// An application thread stopped receiving because the connection must end this way;
    /// the receiver thread carries it out.
    pub(crate) pending_end: Option<End>,
}

impl Engine {
    /// A fresh engine with its receive buffer.
    pub(crate) fn new() -> Self {
        Self {
            buf: vec![0; RX_BUF].into_boxed_slice(),
            ..Self::default()
        }
    }
}

/// The engine in the hands of one thread.
pub(crate) struct Rx<'a> {
    /// The queue pair.
    pub(crate) shared: &'a Shared,
    /// The engine.
    pub(crate) e: Engine,
}

/// What a wait for input ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// The socket has input (or an error / end of stream to report).
    Socket,
    /// Another thread rang the receiver's wake-up bell.
    Bell,
    /// The timeout passed.
    Timeout,
}

/// Waits until the socket is readable, the bell (if given) rings, or `timeout` passes.
pub(crate) fn wait_readable(shared: &Shared, bell: bool, timeout: Option<Duration>) -> Readiness {
    let ts = timeout.map(|t| Timespec {
        tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    let sock = PollFd::new(&shared.stream, PollFlags::IN);
    let wake = PollFd::new(&shared.bell, PollFlags::IN);
    let mut fds = [sock, wake];
    let n = if bell { 2 } else { 1 };
    match rustix::event::poll(&mut fds[..n], ts.as_ref()) {
        Ok(0) => Readiness::Timeout,
        Ok(_) if !fds[0].revents().is_empty() => Readiness::Socket,
        Ok(_) => {
            shared.clear_bell();
            Readiness::Bell
        }
        // EINTR: let the caller look again.
        Err(_) => Readiness::Timeout,
    }
}

impl Rx<'_> {
    pub(crate) fn buffered(&self) -> usize {
        self.e.end - self.e.start
    }

    /// The end reason for a socket that returned EOF or failed.
    pub(crate) fn gone(&self) -> End {
        if self.shared.closed.load(Ordering::Acquire) {
            End::Closed
        } else {
            End::PeerGone
        }
    }

    /// Sets the socket's read timeout (`None`: block) unless it is set already.
    pub(crate) fn set_timeout(&mut self, timeout: Option<Duration>) {
        if self.e.timeout != timeout && self.shared.stream.set_read_timeout(timeout).is_ok() {
            self.e.timeout = timeout;
        }
    }

    /// Reads (blocking) until at least `min` bytes (≤ `RX_BUF`) are buffered.
    pub(crate) fn fill(&mut self, min: usize) -> Result<(), End> {
        while self.buffered() < min {
            match self.read_more(false) {
                Ok(0) => return Err(self.gone()),
                Ok(_) => {}
                Err(e) if transient(&e) => {
                    if self.shared.closed.load(Ordering::Acquire) {
                        return Err(End::Closed);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "soft transport: receive failed");
                    return Err(self.gone());
                }
            }
        }
        Ok(())
    }

    /// One read into the free end of the buffer (compacting it first if needed), blocking or
    /// not. `Ok(0)` is end of stream; a full buffer gives `WouldBlock`.
    fn read_more(&mut self, nonblocking: bool) -> io::Result<usize> {
        let e = &mut self.e;
        if e.end == e.buf.len() || e.buf.len() - e.start < HDR_LEN {
            e.buf.copy_within(e.start..e.end, 0);
            e.end -= e.start;
            e.start = 0;
        }
        let dst = &mut e.buf[e.end..];
        if dst.is_empty() {
            // Full of unprocessed input: nothing can be read now (a read into an empty buffer
            // would look like the end of the stream).
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = if nonblocking {
            rustix::net::recv(&self.shared.stream, dst, RecvFlags::DONTWAIT)
                .map(|(n, _)| n)
                .map_err(io::Error::from)?
        } else {
            (&self.shared.stream).read(dst)?
        };
        e.end += n;
        if n > 0 {
            self.shared.touch_rx();
        }
        Ok(n)
    }

    /// Reads what has arrived without blocking. `Ok(true)`: something was read.
    pub(crate) fn read_available(&mut self) -> Result<bool, End> {
        loop {
            match self.read_more(true) {
                Ok(0) => return Err(self.gone()),
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => {
                    tracing::debug!(error = %e, "soft transport: receive failed");
                    return Err(self.gone());
                }
            }
        }
    }

    /// Processes one decoded frame whose header was consumed (payloads not buffered yet are
    /// read from the socket).
    pub(crate) fn handle(&mut self, frame: Frame) -> Result<(), End> {
        tracing::trace!(?frame, "soft transport: frame in");
        match frame {
            Frame::Ack { msn } => self.on_ack(msn),
            Frame::Nak { msn, status } => Err(self.on_nak(msn, status)),
            Frame::Dreq => Err(End::PeerGone),
            Frame::Nop => Ok(()),
            Frame::Hello | Frame::Accept | Frame::Reject { .. } => Err(End::Violation(
                "handshake frame on an established connection",
            )),
            Frame::Send { len, .. } => self.on_send(len),
            Frame::Write { len, remote } => self.on_write(len, remote, None),
            Frame::WriteImm {
                len, remote, imm, ..
            } => self.on_write(len, remote, Some(imm)),
        }
    }

    /// The buffered header, decoded (not consumed).
    pub(crate) fn peek(&self) -> Result<Frame, End> {
        let mut raw = [0u8; HDR_LEN];
        raw.copy_from_slice(&self.e.buf[self.e.start..self.e.start + HDR_LEN]);
        Frame::decode(&raw).map_err(End::Violation)
    }

    /// Consumes the buffered header.
    pub(crate) fn consume_header(&mut self) {
        self.e.start += HDR_LEN;
    }

    /// Wakes application waiters if completions were queued (before the thread may block).
    pub(crate) fn flush_wake(&mut self) {
        if self.e.wake_pending {
            self.e.wake_pending = false;
            self.shared.wake_app(&self.shared.lock());
        }
    }

    /// True if placed messages wait for their ACK.
    pub(crate) fn ack_due(&self) -> bool {
        let st = self.shared.lock();
        st.rx_msn > st.ack_sent
    }

    /// Sends a due cumulative ACK if nobody is transmitting (otherwise the token holder will).
    pub(crate) fn send_ack(&self) {
        let st = self.shared.lock();
        if st.rx_msn > st.ack_sent || st.ctrl.is_some() {
            drop(pump(self.shared, st));
        }
    }

    fn on_ack(&mut self, msn: u64) -> Result<(), End> {
        let mut st = self.shared.lock();
        let posted = st.acked + st.sq.len() as u64;
        if msn < st.acked || msn > posted {
            return Err(End::Violation("ACK outside the send window"));
        }
        self.e.wake_pending |= self.shared.ack_up_to(&mut st, msn);
        Ok(())
    }

    fn on_nak(&self, msn: u64, status: WcStatus) -> End {
        let mut st = self.shared.lock();
        let posted = st.acked + st.sq.len() as u64;
        if msn <= st.acked || msn > posted {
            return End::Violation("NAK outside the send window");
        }
        tracing::debug!(msn, ?status, "soft transport: peer refused a request");
        self.shared.close(
            &mut st,
            Cause::Failed {
                msn,
                status,
                earlier_ok: true,
            },
        );
        End::Closed
    }

    /// Waits up to the RNR timeout for a posted receive, keeping the peer's ACK timer alive.
    fn await_recv(&mut self) -> Result<(), End> {
        self.flush_wake();
        let shared = self.shared;
        let mut st = shared.lock();
        if !st.recvs.is_empty() {
            return Ok(());
        }
        let deadline = Instant::now() + shared.config.rnr_timeout;
        let keepalive = (shared.config.ack_timeout / 4).max(Duration::from_millis(1));
        tracing::trace!("soft transport: receiver not ready; waiting");
        loop {
            if st.phase == Phase::Closed {
                return Err(End::Closed);
            }
            if !st.recvs.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(End::Refuse(WcStatus::RnrRetryExceeded));
            }
            st.nop_due = true;
            shared.wake_tx(&st);
            st.rx_waiting = true;
            st = shared
                .rx_cv
                .wait_timeout(st, (deadline - now).min(keepalive))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            st.rx_waiting = false;
        }
    }

    /// Validates an RDMA WRITE target: known rkey, in bounds, accessible.
    fn target(&self, len: u32, remote: RemoteAddr) -> Result<(Buffer, usize), End> {
        let refuse = End::Refuse(WcStatus::RemoteAccess);
        let (buffer, base) = match self.shared.lock().regions.get(&remote.rkey) {
            Some(r) => (r.buffer.clone(), r.addr),
            None => return Err(refuse),
        };
        let Some(offset) = remote
            .addr
            .checked_sub(base)
            .and_then(|o| usize::try_from(o).ok())
        else {
            return Err(refuse);
        };
        match offset.checked_add(len as usize) {
            Some(end) if end <= buffer.len() && !buffer.is_app_locked() => Ok((buffer, offset)),
            _ => Err(refuse),
        }
    }

    fn on_write(&mut self, len: u32, remote: RemoteAddr, imm: Option<u32>) -> Result<(), End> {
        // Validate everything before placing a byte (zero-length writes touch no memory and,
        // as in InfiniBand, are not checked against the regions).
        let target = if len > 0 {
            Some(self.target(len, remote)?)
        } else {
            None
        };
        if imm.is_some() {
            self.await_recv()?;
        }
        if let Some((buffer, offset)) = target {
            self.place(&buffer, offset, len as usize)
                .map_err(|e| e.unwrap_or(End::Refuse(WcStatus::RemoteAccess)))?;
        }
        let mut st = self.shared.lock();
        st.rx_msn += 1;
        if let Some(imm) = imm {
            let Some(recv) = st.recvs.pop_front() else {
                return Err(End::Closed);
            };
            self.shared.complete(
                &mut st,
                Completion {
                    wr_id: recv.wr_id,
                    status: WcStatus::Success,
                    opcode: WcOpcode::RecvRdmaWithImm,
                    byte_len: len,
                    imm: Some(imm),
                },
            );
            self.e.wake_pending = true;
        }
        Ok(())
    }

    fn on_send(&mut self, len: u32) -> Result<(), End> {
        self.await_recv()?;
        let local = {
            let st = self.shared.lock();
            match st.recvs.front() {
                Some(recv) => recv.local.clone(),
                None => return Err(End::Closed),
            }
        };
        let failure = match &local {
            _ if len == 0 => None,
            Some(l) if l.len >= len as usize => {
                if l.buffer.is_app_locked() {
                    Some((WcStatus::LocalProtection, WcStatus::RemoteAccess))
                } else {
                    match self.place(&l.buffer, l.offset, len as usize) {
                        Ok(()) => None,
                        Err(Some(end)) => return Err(end),
                        Err(None) => Some((WcStatus::LocalProtection, WcStatus::RemoteAccess)),
                    }
                }
            }
            _ => Some((WcStatus::LocalLength, WcStatus::RemoteInvalidRequest)),
        };
        let mut st = self.shared.lock();
        let Some(recv) = st.recvs.pop_front() else {
            return Err(End::Closed);
        };
        let (status, remote_status) = match failure {
            None => (WcStatus::Success, None),
            Some((local, remote)) => (local, Some(remote)),
        };
        if status == WcStatus::Success {
            st.rx_msn += 1;
        }
        self.shared.complete(
            &mut st,
            Completion {
                wr_id: recv.wr_id,
                status,
                opcode: WcOpcode::Recv,
                byte_len: if status == WcStatus::Success { len } else { 0 },
                imm: None,
            },
        );
        self.e.wake_pending = true;
        match remote_status {
            None => Ok(()),
            Some(remote) => Err(End::Refuse(remote)),
        }
    }

    /// Places `len` payload bytes at `offset` of `buffer`: first what the receive buffer holds,
    /// then straight from the socket into the region, one chunk per NIC access (each access
    /// blocks at most one socket time slice). `Err(None)`: the region became inaccessible.
    fn place(&mut self, buffer: &Buffer, mut offset: usize, len: usize) -> Result<(), Option<End>> {
        let chunk = self.shared.config.chunk_size;
        let mut remaining = len;
        while remaining > 0 {
            let avail = self.buffered();
            if avail > 0 {
                let n = avail.min(remaining).min(chunk);
                let src = &self.e.buf[self.e.start..self.e.start + n];
                buffer
                    .nic_write(offset, n, |dst| dst.copy_from_slice(src))
                    .map_err(|_| None)?;
                self.e.start += n;
                offset += n;
                remaining -= n;
                continue;
            }
            if remaining <= SMALL_READ {
                self.flush_wake();
                self.set_timeout(None);
                self.e.start = 0;
                self.e.end = 0;
                self.fill(1).map_err(Some)?;
                continue;
            }
            self.flush_wake();
            self.set_timeout(Some(self.shared.config.nic_access_timeout));
            let want = remaining.min(chunk);
            let stream = &self.shared.stream;
            let read = buffer
                .nic_write(offset, want, |dst| (&*stream).read(dst))
                .map_err(|_| None)?;
            match read {
                Ok(0) => return Err(Some(self.gone())),
                Ok(n) => {
                    self.shared.touch_rx();
                    offset += n;
                    remaining -= n;
                }
                Err(e) if transient(&e) => {
                    if self.shared.closed.load(Ordering::Acquire) {
                        return Err(Some(End::Closed));
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "soft transport: receive failed");
                    return Err(Some(self.gone()));
                }
            }
        }
        Ok(())
    }

    /// Discards input until the peer closes, an error, or `linger` passes.
    pub(crate) fn drain(&mut self, linger: Duration) {
        let until = Instant::now() + linger;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.shared.stream.set_read_timeout(Some(left)).is_err() {
                return;
            }
            match (&self.shared.stream).read(&mut self.e.buf[..]) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}
