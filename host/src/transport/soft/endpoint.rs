//! [`SoftEndpoint`] (the queue pair seen by the application) and [`SoftRegion`].

use std::io::IoSlice;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::BorrowedFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use super::config::SoftConfig;
use super::engine::Engine;
use super::eventfd::ReadyBell;
use super::frame::{Frame, MAX_CATALOG, MAX_REASON};
use super::look_ahead::LookAhead;
use super::nic;
use super::queue_pair::{Guard, POST_BUDGET, ReadSlot, Shared};
use super::receive::receive_inline;
use super::socket::Socket;
use crate::memory::Buffer;
use crate::transport::waiting::{OpenConnection, Woken};
use crate::transport::{
    Completion, ConnectionEvent, Endpoint, Liveness, MemoryRegion, Result, SendWr, Sge,
    TransportError, Waker,
};

/// A memory region registered with a [`SoftEndpoint`]; deregistered when dropped.
#[derive(Debug)]
pub struct SoftRegion {
    shared: Weak<Shared>,
    key: u32,
    addr: u64,
    buffer: Buffer,
}

impl MemoryRegion for SoftRegion {
    fn addr(&self) -> u64 {
        self.addr
    }
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
    fn buffer(&self) -> &Buffer {
        &self.buffer
    }
}

impl Drop for SoftRegion {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.lock().rc.regions.remove(self.key);
        }
    }
}

/// One end of a software RC connection (see the [module](super) documentation).
///
/// Dropping it disconnects (or rejects, if it is an unaccepted request) and joins its thread,
/// which first sends the final frame due (the DREQ, or the NAK of a message it refused: the
/// peer always learns why the connection ended), for at most `ack_timeout`.
#[derive(Debug)]
pub struct SoftEndpoint {
    shared: Arc<Shared>,
    nic: Option<JoinHandle<()>>,
    peer: Option<SocketAddr>,
    /// Whether the first look after a post reads the socket.
    ahead: LookAhead,
    /// Something was posted since the last look or wait: the next look is a look ahead.
    posted: bool,
    /// Counts this connection in the process's CPU demand (see `waiting`).
    _open: OpenConnection,
}

impl SoftEndpoint {
    /// An endpoint on a freshly set up socket, not established yet (no thread started).
    pub(crate) fn new(config: SoftConfig, stream: TcpStream) -> Result<Self> {
        let socket = Socket::new(stream).map_err(|source| TransportError::Io {
            call: "socket setup",
            source,
        })?;
        let peer = socket.peer_addr();
        let open = OpenConnection::new(socket.stream().local_addr().ok(), peer);
        let rc = Engine::new(config.settings(), Instant::now());
        let ready = ReadyBell::new(socket.fd()).map_err(|source| TransportError::Io {
            call: "eventfd",
            source,
        })?;
        Ok(Self {
            shared: Arc::new(Shared::new(config, socket, rc, ready)),
            nic: None,
            peer,
            ahead: LookAhead::default(),
            posted: false,
            _open: open,
        })
    }

    /// Marks the connection established and starts the NIC thread.
    pub(crate) fn start(&mut self) -> Result<()> {
        self.shared.lock().rc.establish(Instant::now());
        let shared = self.shared.clone();
        let nic = std::thread::Builder::new()
            .name("naaice-soft-nic".into())
            .spawn(move || nic::run(shared))
            .map_err(|source| TransportError::Io {
                call: "spawn",
                source,
            });
        match nic {
            Ok(t) => {
                self.nic = Some(t);
                Ok(())
            }
            Err(e) => {
                self.disconnect();
                Err(e)
            }
        }
    }

    /// Waits until a completion or event is ready (true) or `deadline` passes (false),
    /// receiving on this thread if no other thread is; until `spin_until` it reads the socket
    /// without sleeping.
    fn receive_until(
        &mut self,
        start: Instant,
        deadline: Instant,
        spin_until: Option<Instant>,
    ) -> Result<bool> {
        let shared = &*self.shared;
        let mut st = shared.lock();
        // The clock is read again only when needed after each round.
        let mut clock = Some(start);
        loop {
            if st.rc.has_ready() {
                return Ok(true);
            }
            if st.rc.is_closed() {
                return Err(TransportError::NotConnected);
            }
            if shared.woken.swap(false, Ordering::SeqCst) {
                return Ok(false);
            }
            let now = *clock.get_or_insert_with(Instant::now);
            if now >= deadline {
                return Ok(false);
            }
            clock = None;
            // The NIC thread is not receiving: receive on this thread (no hand-off).
            if let Some(r) = st.take_reader_for_app() {
                st = receive_inline(shared, st, r, now, Some(deadline), spin_until);
                continue;
            }
            // It is (streaming a payload, waiting for a receive): wait for what it produces.
            st.app_waiters += 1;
            st = shared
                .app_cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            st.app_waiters -= 1;
        }
    }

    /// Sends the handshake ACCEPT (server side, before [`SoftEndpoint::start`]).
    pub(crate) fn send_accept(&self) -> Result<()> {
        self.send_handshake(&Frame::Accept.encode(), &[])
    }

    /// Rejects an unaccepted request with `reason` and closes the socket.
    pub(crate) fn reject(&self, reason: &str) {
        self.answer_and_close(reason, MAX_REASON, |len| Frame::Reject { len }, "reject");
    }

    /// Answers a catalog request with `text` (cut at [`MAX_CATALOG`] bytes) and closes the
    /// socket.
    pub(crate) fn send_catalog(&self, text: &str) {
        self.answer_and_close(text, MAX_CATALOG, |len| Frame::Catalog { len }, "catalog");
    }

    /// Sends `frame` with `text` (cut at `max` bytes, on a character boundary) to a request
    /// that is not accepted, and closes the socket.
    fn answer_and_close(&self, text: &str, max: usize, frame: fn(u32) -> Frame, what: &str) {
        let mut end = text.len().min(max);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let text = &text.as_bytes()[..end];
        let hdr = frame(text.len() as u32).encode();
        if let Err(e) = self.send_handshake(&hdr, text) {
            tracing::debug!(error = %e, "soft transport: {what} not delivered");
        }
        self.shared.lock().rc.reject();
        self.shared.socket.shutdown(Shutdown::Write);
    }

    fn send_handshake(&self, hdr: &[u8], payload: &[u8]) -> Result<()> {
        let deadline = Instant::now() + self.shared.config.connect_timeout;
        let mut bufs = [IoSlice::new(hdr), IoSlice::new(payload)];
        self.shared
            .socket
            .send_all(&mut bufs, deadline)
            .map_err(|source| TransportError::Io {
                call: "send",
                source,
            })
    }

    /// Registers `buffer` under a memory key and an address chosen by the caller, as a
    /// hardware RoCE engine's region table does: the peer (and local SGEs) then address the
    /// buffer as `addr .. addr + len` with key `key`. Used to play an FPGA NAA, whose firmware
    /// places regions at NAA addresses and picks the rkeys. Fails if `key` is taken.
    pub fn register_at(&mut self, buffer: &Buffer, addr: u64, key: u32) -> Result<SoftRegion> {
        self.shared.lock().rc.regions.insert(buffer, addr, key)?;
        tracing::trace!(key, addr, len = buffer.len(), "soft transport: register");
        Ok(SoftRegion {
            shared: Arc::downgrade(&self.shared),
            key,
            addr,
            buffer: buffer.clone(),
        })
    }
}

/// Moves the engine's ready completions into `out`; returns how many.
fn take_completions(st: &mut Guard<'_>, out: &mut [Completion]) -> usize {
    let mut n = 0;
    while n < out.len()
        && let Some(c) = st.rc.poll_completion()
    {
        out[n] = c;
        n += 1;
    }
    n
}

impl Endpoint for SoftEndpoint {
    type Region = SoftRegion;

    fn register(&mut self, buffer: &Buffer) -> Result<SoftRegion> {
        let key = self.shared.lock().rc.regions.next_key()?;
        self.register_at(buffer, buffer.addr(), key)
    }

    fn post_recv(&mut self, wr_id: u64, buf: Option<Sge>) -> Result<()> {
        let mut st = self.shared.lock();
        st.rc.post_recv(wr_id, buf)?;
        self.shared.nudge(&mut st);
        Ok(())
    }

    fn post_send(&mut self, wrs: &[SendWr]) -> Result<()> {
        let shared = &*self.shared;
        let mut st = shared.lock();
        st.rc.post_send(wrs)?;
        // Small frames leave from this thread; the NIC thread gets the rest.
        st = shared.pump(st, POST_BUDGET);
        shared.nudge(&mut st);
        drop(st);
        self.posted = true;
        Ok(())
    }

    fn poll(&mut self, out: &mut [Completion]) -> Result<usize> {
        let shared = &*self.shared;
        // The first look after a post comes just before a likely wait: it reads only as the
        // look-ahead learner says (the wait reads anyway).
        let ahead = std::mem::take(&mut self.posted);
        let mut st = shared.lock();
        if !st.rc.has_ready() && (!ahead || self.ahead.reads()) {
            if let Some(r) = st.take_reader_for_app() {
                // Nothing ready: receive what has arrived, if the NIC thread is not receiving.
                st = receive_inline(shared, st, r, Instant::now(), None, None);
            }
            if ahead {
                self.ahead.learn(st.rc.has_ready());
            }
        }
        Ok(take_completions(&mut st, out))
    }

    fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.shared.lock().rc.poll_event()
    }

    fn wait(&mut self, spin_until: Instant, deadline: Instant) -> Result<Woken> {
        self.posted = false;
        let start = Instant::now();
        // Spin until `spin_until`, reading the socket without blocking; then sleep in it.
        let spin_until = Some(spin_until.min(deadline)).filter(|t| *t > start);
        let ready = self.receive_until(start, deadline, spin_until)?;
        let took = start.elapsed();
        Ok(match (ready, spin_until) {
            (false, _) => Woken::TimedOut(took),
            (true, Some(t)) if start + took < t => Woken::Spun(took),
            (true, _) => Woken::Slept(took),
        })
    }

    fn arm_ready(&mut self) -> Result<bool> {
        let shared = &*self.shared;
        let st = shared.lock();
        // A reader this thread left idle stays with it: it sleeps on the socket too and reads
        // what arrives in its next poll (the NIC thread takes the reader after the hand-over
        // time, as from any idle application thread, and then rings).
        shared.ready.arm(matches!(st.read, ReadSlot::AppIdle(..)));
        Ok(st.rc.has_ready() || st.rc.is_closed())
    }

    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.shared.ready.fd())
    }

    fn waker(&self) -> Option<Waker> {
        let shared = Arc::downgrade(&self.shared);
        Some(Waker::new(move || {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            shared.woken.store(true, Ordering::SeqCst);
            // Under the lock: a thread between its look at the flag and its sleep on the
            // condition variable holds it.
            let st = shared.lock();
            shared.app_cv.notify_all();
            drop(st);
            shared.ready.wake();
        }))
    }

    fn liveness(&self) -> Option<Liveness> {
        let shared = Arc::downgrade(&self.shared);
        Some(Liveness::new(move || {
            // Over once torn down, or once the peer closed its socket: its final frames
            // (the DREQ) may not have been read yet, but nothing follows them.
            shared
                .upgrade()
                .is_none_or(|shared| shared.lock().rc.is_closed() || shared.socket.peer_hung_up())
        }))
    }

    fn disconnect(&mut self) {
        let shared = &*self.shared;
        let mut st = shared.lock();
        if !st.rc.is_connected() {
            return;
        }
        tracing::debug!("soft transport: disconnect");
        st.rc.disconnect();
        shared.wake_app(&st);
        let mut st = nic::flush_finals(shared, st, false);
        shared.nudge(&mut st);
        drop(st);
        shared.socket.shutdown(Shutdown::Write);
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }
}

impl Drop for SoftEndpoint {
    fn drop(&mut self) {
        let (pending, connected) = {
            let st = self.shared.lock();
            (
                !st.rc.is_connected() && !st.rc.is_closed(),
                st.rc.is_connected(),
            )
        };
        if pending {
            self.reject("connection request dropped");
        } else if connected {
            self.disconnect();
        }
        // The queue pair is torn down now. Its NIC thread still writes the final frames (the
        // NAK of a refused message, the DREQ: the peer must see why the connection ended, as
        // from a real RC queue pair), bounded by `ack_timeout`; only its wait for the peer's
        // remaining input is cut short (shutting the read side down ends it).
        self.shared.socket.shutdown(Shutdown::Read);
        if let Some(t) = self.nic.take()
            && t.join().is_err()
        {
            tracing::error!("soft transport: NIC thread panicked");
        }
        self.shared.socket.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig};
    use crate::transport::AnyTransport;
    use crate::transport::soft::socket::watch;
    use crate::transport::waiting::WaitPolicy;
    use crate::{Naa, NaaOptions, Param};

    /// A client and an NAA that sleep in their waits do not read the socket before they
    /// sleep (the sleep reads): the client's look after posting an RPC and the NAA's look
    /// after posting an answer make a receive that finds nothing only when they probe
    /// (one look in 16 on each side, see `look_ahead`).
    #[test]
    fn sleeping_waits_make_no_empty_reads() {
        const RPCS: usize = 200;
        let transport: AnyTransport = "soft".parse().unwrap();
        let naa = SoftNaa::bind(
            transport.clone(),
            "127.0.0.1:0".parse().unwrap(),
            SoftNaaConfig {
                wait: WaitPolicy::Sleep,
                ..SoftNaaConfig::default()
            },
            KernelRegistry::builtin(),
        )
        .unwrap()
        .spawn()
        .unwrap();
        let options = NaaOptions {
            wait: WaitPolicy::Sleep,
            ..NaaOptions::at(naa.local_addr())
        };
        let p = Param::from_vec(vec![1u8; 64]);
        let mut h: Naa =
            Naa::create_with(&transport, 3, vec![p.clone()], vec![p], &options).unwrap();
        h.invoke().unwrap();
        h.wait().unwrap();
        watch::EMPTY_READS.store(0, Ordering::Relaxed);
        watch::PORT.store(naa.local_addr().port(), Ordering::Relaxed);
        for _ in 0..RPCS {
            h.invoke().unwrap();
            assert!(h.wait().unwrap().naa_error.is_success());
        }
        watch::PORT.store(0, Ordering::Relaxed);
        let empty = watch::EMPTY_READS.load(Ordering::Relaxed);
        h.finalize();
        assert!(empty <= RPCS / 4, "{empty} empty reads in {RPCS} RPCs");
    }
}
