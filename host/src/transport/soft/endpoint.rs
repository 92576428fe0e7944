//! [`SoftEndpoint`] (the queue pair seen by the application) and [`SoftRegion`].

use std::io::IoSlice;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use super::SoftConfig;
use super::frame::{Frame, MAX_REASON};
use super::inline::receive_inline;
use super::qp::{
    Local, Phase, RecvEntry, Registered, SendEntry, Shared, State, TxToken, memory_key,
};
use super::tx::{pump, send, send_final};
use super::{nic, tx};
use crate::memory::Buffer;
use crate::transport::{
    Completion, ConnectionEvent, Endpoint, MemoryRegion, Result, SendWr, Sge, TransportError,
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
    fn len(&self) -> usize {
        self.buffer.len()
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
            shared.lock().regions.remove(&self.key);
        }
    }
}

/// One end of a software RC connection (see the [module](super) documentation).
///
/// Dropping it disconnects (or rejects, if it is an unaccepted request) and joins its threads.
#[derive(Debug)]
pub struct SoftEndpoint {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    peer: Option<SocketAddr>,
}

impl SoftEndpoint {
    /// An endpoint on a freshly set up socket, in `phase` (threads not started yet).
    pub(crate) fn new(config: SoftConfig, stream: TcpStream, phase: Phase) -> Result<Self> {
        let io = |call| move |source| TransportError::Io { call, source };
        stream
            .set_nodelay(true)
            .map_err(io("setsockopt(TCP_NODELAY)"))?;
        stream
            .set_read_timeout(None)
            .map_err(io("setsockopt(SO_RCVTIMEO)"))?;
        stream
            .set_write_timeout(Some(config.nic_access_timeout))
            .map_err(io("setsockopt(SO_SNDTIMEO)"))?;
        let peer = stream.peer_addr().ok();
        Ok(Self {
            shared: Arc::new(Shared::new(config, stream, phase).map_err(io("eventfd"))?),
            threads: Vec::new(),
            peer,
        })
    }

    /// Marks the connection established and starts the receiver and sender threads.
    pub(crate) fn start(&mut self) -> Result<()> {
        {
            let mut st = self.shared.lock();
            st.phase = Phase::Connected;
            st.events.push_back(ConnectionEvent::Established);
            self.shared.wake_app(&st);
        }
        let spawn = |name: &str, f: fn(Arc<Shared>)| {
            let shared = self.shared.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || f(shared))
                .map_err(|source| TransportError::Io {
                    call: "spawn",
                    source,
                })
        };
        let rx = spawn("naaice-soft-rx", nic::run_receiver)?;
        self.threads.push(rx);
        match spawn("naaice-soft-tx", tx::run_sender) {
            Ok(t) => self.threads.push(t),
            Err(e) => {
                self.disconnect();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Sends the handshake ACCEPT (server side, before [`SoftEndpoint::start`]).
    pub(crate) fn send_accept(&self) -> Result<()> {
        self.send_handshake(&Frame::Accept.encode(), &[])
    }

    /// Rejects an unaccepted request with `reason` and closes the socket.
    pub(crate) fn reject(&self, reason: &str) {
        let mut end = reason.len().min(MAX_REASON);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let reason = &reason.as_bytes()[..end];
        let hdr = Frame::Reject {
            len: reason.len() as u32,
        }
        .encode();
        if let Err(e) = self.send_handshake(&hdr, reason) {
            tracing::debug!(error = %e, "soft transport: reject not delivered");
        }
        let mut st = self.shared.lock();
        self.shared.close(&mut st, super::qp::Cause::Flush);
        drop(st);
        self.shared.shutdown(Shutdown::Write);
    }

    fn send_handshake(&self, hdr: &[u8], payload: &[u8]) -> Result<()> {
        let deadline = Instant::now() + self.shared.config.connect_timeout;
        let mut bufs = [IoSlice::new(hdr), IoSlice::new(payload)];
        let mut bufs = &mut bufs[..];
        while !bufs.is_empty() {
            match send(&self.shared, bufs, false) {
                Ok(n) => IoSlice::advance_slices(&mut bufs, n),
                Err(e) if tx::transient(&e) && Instant::now() < deadline => {}
                Err(source) => {
                    return Err(TransportError::Io {
                        call: "send",
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// Resolves an SGE against the registered regions.
    fn local(st: &State, sge: &Sge) -> Result<Local> {
        let region = st
            .regions
            .get(&sge.lkey)
            .ok_or(TransportError::InvalidRequest("unknown lkey"))?;
        let buffer = &region.buffer;
        let outside = TransportError::InvalidRequest("SGE outside its region");
        let offset = sge
            .addr
            .checked_sub(region.addr)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or(outside)?;
        let len = sge.len as usize;
        match offset.checked_add(len) {
            Some(end) if end <= buffer.len() => Ok(Local {
                buffer: buffer.clone(),
                offset,
                len,
            }),
            _ => Err(TransportError::InvalidRequest("SGE outside its region")),
        }
    }
}

impl SoftEndpoint {
    /// Registers `buffer` under a memory key and an address chosen by the caller, as a
    /// hardware RoCE engine's region table does: the peer (and local SGEs) then address the
    /// buffer as `addr .. addr + len` with key `key`. Used to play an FPGA NAA, whose firmware
    /// places regions at NAA addresses and picks the rkeys. Fails if `key` is taken.
    pub fn register_at(&mut self, buffer: &Buffer, addr: u64, key: u32) -> Result<SoftRegion> {
        if buffer.is_empty() {
            return Err(TransportError::InvalidRequest("zero-length buffer"));
        }
        if addr.checked_add(buffer.len() as u64).is_none() {
            return Err(TransportError::InvalidRequest("region address range wraps"));
        }
        self.insert_region(buffer, addr, key)
    }

    fn insert_region(&mut self, buffer: &Buffer, addr: u64, key: u32) -> Result<SoftRegion> {
        let registered = Registered {
            buffer: buffer.clone(),
            addr,
        };
        let mut st = self.shared.lock();
        if st.regions.contains_key(&key) {
            return Err(TransportError::InvalidRequest("memory key in use"));
        }
        st.regions.insert(key, registered);
        drop(st);
        tracing::trace!(key, addr, len = buffer.len(), "soft transport: register");
        Ok(SoftRegion {
            shared: Arc::downgrade(&self.shared),
            key,
            addr,
            buffer: buffer.clone(),
        })
    }
}

impl Endpoint for SoftEndpoint {
    type Region = SoftRegion;

    fn register(&mut self, buffer: &Buffer) -> Result<SoftRegion> {
        if buffer.is_empty() {
            return Err(TransportError::InvalidRequest("zero-length buffer"));
        }
        let mut st = self.shared.lock();
        // Skip keys taken by `register_at` (generated keys never repeat among themselves).
        let mut key = None;
        for _ in 0..4 {
            st.registrations = st.registrations.wrapping_add(1);
            let k = memory_key(self.shared.key_salt, st.registrations);
            if !st.regions.contains_key(&k) {
                key = Some(k);
                break;
            }
        }
        let key = key.ok_or(TransportError::InvalidRequest("memory keys exhausted"))?;
        drop(st);
        self.insert_region(buffer, buffer.addr(), key)
    }

    fn post_recv(&mut self, wr_id: u64, buf: Option<Sge>) -> Result<()> {
        let mut st = self.shared.lock();
        if st.phase == Phase::Closed {
            return Err(TransportError::NotConnected);
        }
        if st.recvs.len() >= self.shared.config.max_recv_wr {
            return Err(TransportError::InvalidRequest("receive queue full"));
        }
        let local = buf.map(|sge| Self::local(&st, &sge)).transpose()?;
        st.recvs.push_back(RecvEntry { wr_id, local });
        if st.rx_waiting {
            self.shared.rx_cv.notify_one();
        }
        Ok(())
    }

    fn post_send(&mut self, wrs: &[SendWr]) -> Result<()> {
        let shared = &*self.shared;
        let mut st = shared.lock();
        if st.phase != Phase::Connected {
            return Err(TransportError::NotConnected);
        }
        if st.sq.len() + wrs.len() > shared.config.max_send_wr {
            return Err(TransportError::InvalidRequest("send queue full"));
        }
        // Validate the whole list first: it is posted entirely or not at all.
        for wr in wrs {
            if let Some(sge) = &wr.local {
                Self::local(&st, sge)?;
            }
        }
        for wr in wrs {
            let local = wr
                .local
                .as_ref()
                .map(|sge| Self::local(&st, sge))
                .transpose()?;
            st.sq.push_back(SendEntry { wr: *wr, local });
        }
        // Wait out a short (non-blocking) transmission by another thread, then send what is
        // small right here; the sender thread gets the rest.
        let mut spins = 0u32;
        while st.token == TxToken::Short {
            drop(st);
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            st = shared.lock();
        }
        if st.token == TxToken::Free {
            st = pump(shared, st);
        }
        // Whoever holds the token re-examines the queue when giving it back; the sender
        // thread needs waking only for a large frame (pump did that) or to start its timer.
        shared.arm_ack_timer(&st);
        Ok(())
    }

    fn poll(&mut self, out: &mut [Completion]) -> Result<usize> {
        let shared = &*self.shared;
        let mut st = shared.lock();
        if st.cq.is_empty() && st.events.is_empty() {
            // Nothing ready: receive what has arrived, if the receiver thread is idle.
            if let Some(engine) = st.take_engine_for_app() {
                drop(st);
                receive_inline(shared, engine, None);
                st = shared.lock();
            }
        }
        let n = out.len().min(st.cq.len());
        for (slot, c) in out.iter_mut().zip(st.cq.drain(..n)) {
            *slot = c;
        }
        Ok(n)
    }

    fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.shared.lock().events.pop_front()
    }

    fn wait(&mut self, deadline: Instant) -> Result<bool> {
        let shared = &*self.shared;
        let ready = |st: &State| !st.cq.is_empty() || !st.events.is_empty();
        let mut spun = false;
        let mut st = shared.lock();
        loop {
            if ready(&st) {
                return Ok(true);
            }
            if st.phase == Phase::Closed {
                return Err(TransportError::NotConnected);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            // The receiver thread is idle: receive on this thread (no hand-off).
            if let Some(engine) = st.take_engine_for_app() {
                drop(st);
                receive_inline(shared, engine, Some(deadline));
                st = shared.lock();
                continue;
            }
            // The receiver thread is busy (streaming a payload, waiting for a receive): wait
            // for what it produces, spinning briefly first if so configured.
            if !spun && !shared.config.wait_spin.is_zero() {
                spun = true;
                let generation = shared.ready_gen.load(Ordering::Acquire);
                drop(st);
                let spin_until = (now + shared.config.wait_spin).min(deadline);
                while shared.ready_gen.load(Ordering::Acquire) == generation
                    && Instant::now() < spin_until
                {
                    std::hint::spin_loop();
                }
                st = shared.lock();
                continue;
            }
            st.app_waiters += 1;
            st = shared
                .app_cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            st.app_waiters -= 1;
        }
    }

    fn disconnect(&mut self) {
        let shared = &*self.shared;
        {
            let mut st = shared.lock();
            if st.phase != Phase::Connected {
                return;
            }
            tracing::debug!("soft transport: disconnect");
            shared.close(&mut st, super::qp::Cause::Flush);
        }
        send_final(shared, Frame::Dreq);
        shared.shutdown(Shutdown::Write);
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }
}

impl Drop for SoftEndpoint {
    fn drop(&mut self) {
        let phase = self.shared.lock().phase;
        match phase {
            Phase::Pending => self.reject("connection request dropped"),
            Phase::Connected => self.disconnect(),
            Phase::Closed => {}
        }
        self.shared.shutdown(Shutdown::Both);
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                tracing::error!("soft transport: engine thread panicked");
            }
        }
    }
}
