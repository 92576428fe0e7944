//! The receive side, acting like a NIC: one thread per endpoint reads frames, validates them
//! against the registered regions and places payload bytes straight into registered memory
//! (small leftovers from the header read are copied from the receive buffer; everything else
//! is read from the socket directly into the region, chunk by chunk). It consumes posted
//! receives, produces receive completions, handles ACK/NAK for the send queue, and sends
//! cumulative ACKs when the input runs dry.

use std::io::{self, Read};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::frame::{Frame, HDR_LEN};
use super::qp::{Cause, Phase, Shared};
use super::tx::{pump, send_final, transient};
use crate::memory::Buffer;
use crate::transport::{Completion, RemoteAddr, WcOpcode, WcStatus};

/// Size of the receive buffer (headers and small payloads).
const RX_BUF: usize = 64 * 1024;
/// Payload remainders up to this size are read through the receive buffer (so that the next
/// header comes with them) rather than straight into the region.
const SMALL_READ: usize = 16 * 1024;

/// How the receive loop ended.
#[derive(Debug)]
enum End {
    /// EOF, reset or DREQ from the peer.
    PeerGone,
    /// The peer broke the protocol.
    Violation(&'static str),
    /// A data message is refused: NAK it with `status` and tear down.
    Refuse(WcStatus),
    /// The connection was already torn down locally (or by a NAK we received).
    Closed,
}

/// The receive engine's buffer and cursor.
struct Rx<'a> {
    shared: &'a Shared,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The read timeout currently set on the socket.
    timeout: Option<Duration>,
    /// Completions were queued since waiters were last woken.
    wake_pending: bool,
}

/// The receiver thread.
pub(crate) fn run_receiver(shared: Arc<Shared>) {
    let mut rx = Rx {
        shared: &shared,
        buf: vec![0; RX_BUF].into_boxed_slice(),
        start: 0,
        end: 0,
        timeout: None,
        wake_pending: false,
    };
    let end = rx.run().err().unwrap_or(End::Closed);
    rx.flush_wake();
    rx.set_timeout(None);
    let linger = shared.config.ack_timeout;
    match end {
        End::PeerGone => {
            tracing::debug!("soft transport: peer disconnected");
            shared.close(&mut shared.lock(), Cause::Flush);
            shared.shutdown(Shutdown::Both);
        }
        End::Violation(why) => {
            tracing::warn!(why, "soft transport: peer protocol violation; tearing down");
            shared.close(&mut shared.lock(), Cause::Flush);
            shared.shutdown(Shutdown::Both);
        }
        End::Refuse(status) => {
            let msn = {
                let mut st = shared.lock();
                let msn = st.rx_msn + 1;
                shared.close(&mut st, Cause::Flush);
                msn
            };
            tracing::debug!(msn, ?status, "soft transport: refusing message");
            send_final(&shared, Frame::Nak { msn, status });
            shared.shutdown(Shutdown::Write);
            rx.drain(linger);
            shared.shutdown(Shutdown::Both);
        }
        End::Closed => {
            // Torn down locally (disconnect, NAK received, sender failure): let the peer's
            // remaining bytes arrive until it closes too, so that our close does not reset
            // frames still in flight to it.
            rx.drain(linger);
            shared.shutdown(Shutdown::Both);
        }
    }
}

impl Rx<'_> {
    fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// The end reason for a socket that returned EOF or failed.
    fn gone(&self) -> End {
        if self.shared.closed.load(Ordering::Acquire) {
            End::Closed
        } else {
            End::PeerGone
        }
    }

    /// Sets the socket's read timeout (`None`: block) unless it is set already.
    fn set_timeout(&mut self, timeout: Option<Duration>) {
        if self.timeout != timeout && self.shared.stream.set_read_timeout(timeout).is_ok() {
            self.timeout = timeout;
        }
    }

    /// Reads until at least `min` bytes (≤ `RX_BUF`) are buffered.
    fn fill(&mut self, min: usize) -> Result<(), End> {
        self.fill_or_timeout(min, false).map(|_| ())
    }

    /// Like [`Rx::fill`]; with `stop_on_timeout`, returns `Ok(false)` when the read timeout
    /// expires first.
    fn fill_or_timeout(&mut self, min: usize, stop_on_timeout: bool) -> Result<bool, End> {
        while self.buffered() < min {
            if self.end == self.buf.len() || self.buf.len() - self.start < min {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            match (&self.shared.stream).read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(self.gone()),
                Ok(n) => {
                    self.end += n;
                    self.shared.touch_rx();
                }
                Err(e) if transient(&e) => {
                    if self.shared.closed.load(Ordering::Acquire) {
                        return Err(End::Closed);
                    }
                    if stop_on_timeout && e.kind() != io::ErrorKind::Interrupted {
                        return Ok(false);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "soft transport: receive failed");
                    return Err(self.gone());
                }
            }
        }
        Ok(true)
    }

    /// The receive loop; returns only with the reason it ended.
    fn run(&mut self) -> Result<(), End> {
        loop {
            if self.buffered() < HDR_LEN {
                self.flush_wake();
                let delay = self.shared.config.ack_delay;
                if self.buffered() == 0 && self.ack_due() && !delay.is_zero() {
                    // Input ran dry with an ACK due: give the application a moment to post a
                    // reply that carries it (no extra segment, no extra wake-up at the peer).
                    self.set_timeout(Some(delay));
                    if !self.fill_or_timeout(HDR_LEN, true)? {
                        self.send_ack();
                    }
                }
                if self.buffered() == 0 {
                    self.send_ack();
                }
                self.set_timeout(None);
                self.fill(HDR_LEN)?;
            }
            let mut raw = [0u8; HDR_LEN];
            raw.copy_from_slice(&self.buf[self.start..self.start + HDR_LEN]);
            self.start += HDR_LEN;
            let frame = Frame::decode(&raw).map_err(End::Violation)?;
            tracing::trace!(?frame, "soft transport: frame in");
            match frame {
                Frame::Ack { msn } => self.on_ack(msn)?,
                Frame::Nak { msn, status } => return Err(self.on_nak(msn, status)),
                Frame::Dreq => return Err(End::PeerGone),
                Frame::Nop => {}
                Frame::Hello | Frame::Accept | Frame::Reject { .. } => {
                    return Err(End::Violation(
                        "handshake frame on an established connection",
                    ));
                }
                Frame::Send { len, .. } => self.on_send(len)?,
                Frame::Write { len, remote } => self.on_write(len, remote, None)?,
                Frame::WriteImm {
                    len, remote, imm, ..
                } => self.on_write(len, remote, Some(imm))?,
            }
        }
    }

    /// Wakes application waiters if completions were queued (before the thread may block).
    fn flush_wake(&mut self) {
        if self.wake_pending {
            self.wake_pending = false;
            self.shared.wake_app(&self.shared.lock());
        }
    }

    /// True if placed messages wait for their ACK.
    fn ack_due(&self) -> bool {
        let st = self.shared.lock();
        st.rx_msn > st.ack_sent
    }

    /// Sends a due cumulative ACK if nobody is transmitting (otherwise the token holder will).
    fn send_ack(&self) {
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
        self.wake_pending |= self.shared.ack_up_to(&mut st, msn);
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
            self.wake_pending = true;
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
        self.wake_pending = true;
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
                let src = &self.buf[self.start..self.start + n];
                buffer
                    .nic_write(offset, n, |dst| dst.copy_from_slice(src))
                    .map_err(|_| None)?;
                self.start += n;
                offset += n;
                remaining -= n;
                continue;
            }
            if remaining <= SMALL_READ {
                self.flush_wake();
                self.set_timeout(None);
                self.start = 0;
                self.end = 0;
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
    fn drain(&mut self, linger: Duration) {
        let until = Instant::now() + linger;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.shared.stream.set_read_timeout(Some(left)).is_err() {
                return;
            }
            match (&self.shared.stream).read(&mut self.buf[..]) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}
