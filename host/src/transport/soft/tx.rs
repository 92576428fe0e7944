//! The transmit side: the sender thread (streams large frames from registered memory in chunks,
//! runs the acknowledgement timer) and the non-blocking fast path used by posting threads and
//! the receiver thread (small frames and ACKs go out at once, header and payload in one system
//! call).
//!
//! Only the holder of the transmit token ([`TxToken`]) writes to the socket, so frames never
//! interleave. Whoever gives the token back re-examines the pending work and either does it
//! (if it is small) or wakes the sender thread.

use std::io::{self, IoSlice};
use std::net::Shutdown;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::Instant;

use socket2::SockRef;

use super::frame::{Frame, HDR_LEN};
use super::qp::{Cause, Local, PartialCtrl, Phase, Shared, State, TxSleep, TxToken};
use crate::memory::Inaccessible;
use crate::transport::WcStatus;

/// Sends `bufs` with one system call; never raises SIGPIPE. Non-blocking if asked, otherwise
/// blocking up to the socket's send timeout (the NIC access time slice).
pub(crate) fn send(shared: &Shared, bufs: &[IoSlice<'_>], nonblocking: bool) -> io::Result<usize> {
    let flags = libc::MSG_NOSIGNAL | if nonblocking { libc::MSG_DONTWAIT } else { 0 };
    SockRef::from(&shared.stream).send_vectored_with_flags(bufs, flags)
}

/// True for errors that only mean "try again".
pub(crate) fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// A frame to (continue to) transmit.
struct FrameWork {
    /// Its msn.
    msn: u64,
    /// Header.
    hdr: [u8; HDR_LEN],
    /// Payload source.
    local: Option<Local>,
    /// Frame bytes already written.
    offset: usize,
}

impl FrameWork {
    fn total(&self) -> usize {
        HDR_LEN + self.local.as_ref().map_or(0, |l| l.len)
    }
}

/// The next data frame, if any.
fn next_frame(st: &mut State) -> Option<FrameWork> {
    let idx = st.next_tx_index()?;
    let entry = &st.sq[idx];
    Some(FrameWork {
        msn: st.tx_next,
        hdr: entry.header(),
        local: entry.local.clone(),
        offset: st.tx_offset,
    })
}

/// Why a blocking transmission stopped.
enum TxError {
    /// The connection was torn down meanwhile.
    Closed,
    /// No byte could be written for `ack_timeout`.
    Stalled,
    /// The payload's buffer became inaccessible (the application holds it).
    Local,
    /// The socket failed.
    Io(io::Error),
}

/// Transmits whatever can go out without blocking: a half-written control frame or a due ACK,
/// then small data frames (up to `inline_size`). Must be called with the token free or held
/// `Short` by nobody else; returns with the token free. Wakes the sender thread for what is
/// left.
pub(crate) fn pump<'a>(shared: &'a Shared, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    let st = pump_frames(shared, st);
    shared.arm_ack_timer(&st);
    st
}

/// The body of [`pump`].
fn pump_frames<'a>(shared: &'a Shared, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    loop {
        if st.phase != Phase::Connected || st.token != TxToken::Free {
            return st;
        }
        let partial = st.ctrl.take();
        let ctrl = match partial {
            Some(p) => Some(p),
            None => st.take_ctrl().map(|bytes| PartialCtrl { bytes, sent: 0 }),
        };
        let frame = match next_frame(&mut st) {
            Some(f) if f.total() - f.offset <= shared.config.inline_size => Some(f),
            Some(_) => {
                // Large frame: the sender thread streams it (after our control frame, if any).
                if ctrl.is_none() {
                    shared.wake_tx(&st);
                    return st;
                }
                None
            }
            None => None,
        };
        if ctrl.is_none() && frame.is_none() {
            return st;
        }
        st.token = TxToken::Short;
        drop(st);

        let ctrl_rest: &[u8] = ctrl.as_ref().map_or(&[], |c| &c.bytes[c.sent..]);
        let result: Result<io::Result<usize>, Inaccessible> = match &frame {
            None => Ok(send(shared, &[IoSlice::new(ctrl_rest)], true)),
            Some(f) => {
                let hdr_rest = &f.hdr[f.offset.min(HDR_LEN)..];
                match &f.local {
                    Some(local) if local.len > 0 => {
                        let done = f.offset.saturating_sub(HDR_LEN);
                        local
                            .buffer
                            .nic_read(local.offset + done, local.len - done, |payload| {
                                let bufs = [
                                    IoSlice::new(ctrl_rest),
                                    IoSlice::new(hdr_rest),
                                    IoSlice::new(payload),
                                ];
                                send(shared, &bufs, true)
                            })
                    }
                    _ => Ok(send(
                        shared,
                        &[IoSlice::new(ctrl_rest), IoSlice::new(hdr_rest)],
                        true,
                    )),
                }
            }
        };

        st = shared.lock();
        st.token = TxToken::Free;
        let written = match result {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => {
                if !transient(&e) {
                    tracing::debug!(error = %e, "soft transport: send failed");
                }
                0
            }
            Err(_) => {
                // The application holds the payload's buffer: local protection error.
                if let Some(f) = &frame {
                    shared.close(
                        &mut st,
                        Cause::Failed {
                            msn: f.msn,
                            status: WcStatus::LocalProtection,
                            earlier_ok: false,
                        },
                    );
                    drop(st);
                    shared.shutdown(Shutdown::Both);
                    st = shared.lock();
                }
                return st;
            }
        };
        let mut rest = written;
        if let Some(mut c) = ctrl {
            let left = HDR_LEN - c.sent;
            if rest < left {
                c.sent += rest;
                st.ctrl = Some(c);
                shared.wake_tx(&st);
                return st;
            }
            rest -= left;
        }
        if let Some(f) = frame
            && st.tx_next == f.msn
        {
            let left = f.total() - f.offset;
            if rest >= left {
                st.frame_done(Instant::now());
            } else {
                st.tx_offset = f.offset + rest;
                shared.wake_tx(&st);
                return st;
            }
        }
        if written == 0 {
            shared.wake_tx(&st);
            return st;
        }
    }
}

/// Writes `bytes` completely, blocking in time slices; gives up when the connection closes or
/// no byte could be written for `ack_timeout`.
fn write_blocking(shared: &Shared, mut bytes: &[u8]) -> Result<(), TxError> {
    let mut progress = Instant::now();
    while !bytes.is_empty() {
        match send(shared, &[IoSlice::new(bytes)], false) {
            Ok(n) => {
                bytes = &bytes[n..];
                progress = Instant::now();
            }
            Err(e) if transient(&e) => check_stall(shared, progress)?,
            Err(e) => return Err(TxError::Io(e)),
        }
    }
    Ok(())
}

/// Fails if the connection closed or the stall lasted `ack_timeout`.
fn check_stall(shared: &Shared, progress: Instant) -> Result<(), TxError> {
    if shared.closed.load(std::sync::atomic::Ordering::Acquire) {
        Err(TxError::Closed)
    } else if progress.elapsed() >= shared.config.ack_timeout {
        Err(TxError::Stalled)
    } else {
        Ok(())
    }
}

/// Streams one data frame from `f.offset` on, the payload in chunks read straight from the
/// registered memory (each chunk's NIC access lasts at most one socket time slice).
fn write_frame(shared: &Shared, f: &FrameWork) -> Result<(), TxError> {
    let total = f.total();
    let chunk = shared.config.chunk_size;
    let mut sent = f.offset;
    let mut progress = Instant::now();
    while sent < total {
        if shared.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(TxError::Closed);
        }
        let hdr_rest = &f.hdr[sent.min(HDR_LEN)..];
        let result = match &f.local {
            Some(local) if local.len > 0 => {
                let done = sent.saturating_sub(HDR_LEN);
                let len = (local.len - done).min(chunk);
                local.buffer.nic_read(local.offset + done, len, |payload| {
                    send(
                        shared,
                        &[IoSlice::new(hdr_rest), IoSlice::new(payload)],
                        false,
                    )
                })
            }
            _ => Ok(send(shared, &[IoSlice::new(hdr_rest)], false)),
        };
        match result {
            Err(_) => return Err(TxError::Local),
            Ok(Ok(n)) => {
                sent += n;
                if n > 0 {
                    progress = Instant::now();
                }
            }
            Ok(Err(e)) if transient(&e) => check_stall(shared, progress)?,
            Ok(Err(e)) => return Err(TxError::Io(e)),
        }
    }
    Ok(())
}

/// Work the sender thread takes the token for.
enum Work {
    Ctrl(PartialCtrl),
    Frame(FrameWork),
}

/// The sender thread: streams large frames, finishes what the fast path could not, sends due
/// ACKs and keep-alives, and fires the acknowledgement timer (`RetryExceeded`).
pub(crate) fn run_sender(shared: Arc<Shared>) {
    let mut st = shared.lock();
    loop {
        if st.phase == Phase::Closed {
            return;
        }
        if let Some(expiry) = shared.ack_expiry(&st)
            && Instant::now() >= expiry
        {
            tracing::debug!("soft transport: acknowledgement timeout");
            let msn = st.acked + 1;
            shared.close(
                &mut st,
                Cause::Failed {
                    msn,
                    status: WcStatus::RetryExceeded,
                    earlier_ok: false,
                },
            );
            drop(st);
            shared.shutdown(Shutdown::Both);
            return;
        }
        if st.token == TxToken::Free {
            let work = match st.ctrl.take() {
                Some(c) => Some(Work::Ctrl(c)),
                None => match st.take_ctrl() {
                    Some(bytes) => Some(Work::Ctrl(PartialCtrl { bytes, sent: 0 })),
                    None => next_frame(&mut st).map(Work::Frame),
                },
            };
            if let Some(work) = work {
                st.token = TxToken::Long;
                drop(st);
                let (result, msn) = match &work {
                    Work::Ctrl(c) => (write_blocking(&shared, &c.bytes[c.sent..]), None),
                    Work::Frame(f) => (write_frame(&shared, f), Some(f.msn)),
                };
                st = shared.lock();
                st.token = TxToken::Free;
                if result.is_err() {
                    // A frame may have been cut off mid-way: nothing may follow it.
                    st.wire_torn = true;
                }
                let failure = match result {
                    Ok(()) => {
                        if msn.is_some_and(|msn| st.tx_next == msn) {
                            st.frame_done(Instant::now());
                        }
                        continue;
                    }
                    Err(TxError::Closed) => return,
                    Err(TxError::Stalled) => Cause::Failed {
                        msn: st.acked + 1,
                        status: WcStatus::RetryExceeded,
                        earlier_ok: false,
                    },
                    Err(TxError::Local) => Cause::Failed {
                        msn: msn.unwrap_or(st.acked + 1),
                        status: WcStatus::LocalProtection,
                        earlier_ok: false,
                    },
                    Err(TxError::Io(e)) => {
                        tracing::debug!(error = %e, "soft transport: send failed");
                        Cause::Flush
                    }
                };
                shared.close(&mut st, failure);
                drop(st);
                shared.shutdown(Shutdown::Both);
                return;
            }
        }
        st = match shared.ack_expiry(&st) {
            Some(expiry) => {
                st.tx_sleep = TxSleep::Timed;
                let timeout = expiry.saturating_duration_since(Instant::now());
                shared
                    .tx_cv
                    .wait_timeout(st, timeout)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => {
                st.tx_sleep = TxSleep::Untimed;
                shared
                    .tx_cv
                    .wait(st)
                    .unwrap_or_else(PoisonError::into_inner)
            }
        };
        st.tx_sleep = TxSleep::Awake;
    }
}

/// Sends a final control frame (NAK or DREQ) during teardown, after a half-written control
/// frame if there is one. Gives up if the sender thread is in the middle of a data frame (the
/// peer then sees the connection close instead).
pub(crate) fn send_final(shared: &Shared, frame: Frame) {
    let mut st = shared.lock();
    // Wait for the token: a short transmission ends at once, the sender thread's within one
    // socket time slice (it stops between chunks once the connection is closed).
    let give_up = Instant::now() + 4 * shared.config.nic_access_timeout;
    let mut spins = 0u32;
    while st.token != TxToken::Free && Instant::now() < give_up {
        drop(st);
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        st = shared.lock();
    }
    if st.token != TxToken::Free || st.wire_torn || st.tx_offset > 0 {
        tracing::debug!("soft transport: final frame skipped (a data frame is partly sent)");
        return;
    }
    st.token = TxToken::Long;
    let partial = st.ctrl.take();
    // A due ACK goes out first, so that what we placed completes successfully at the peer.
    let ack = st.take_ctrl();
    drop(st);
    let mut bytes = [0u8; 3 * HDR_LEN];
    let mut len = 0;
    if let Some(c) = partial {
        let rest = &c.bytes[c.sent..];
        bytes[..rest.len()].copy_from_slice(rest);
        len = rest.len();
    }
    if let Some(a) = ack {
        bytes[len..len + HDR_LEN].copy_from_slice(&a);
        len += HDR_LEN;
    }
    bytes[len..len + HDR_LEN].copy_from_slice(&frame.encode());
    len += HDR_LEN;
    let result = write_final(shared, &bytes[..len]);
    if let Err(e) = result {
        tracing::debug!(error = %e, "soft transport: final frame not sent");
    }
    shared.lock().token = TxToken::Free;
}

/// Writes a teardown frame, blocking at most `ack_timeout` without progress.
fn write_final(shared: &Shared, mut bytes: &[u8]) -> io::Result<()> {
    let mut progress = Instant::now();
    while !bytes.is_empty() {
        match send(shared, &[IoSlice::new(bytes)], false) {
            Ok(n) => {
                bytes = &bytes[n..];
                progress = Instant::now();
            }
            Err(e) if transient(&e) && progress.elapsed() < shared.config.ack_timeout => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
