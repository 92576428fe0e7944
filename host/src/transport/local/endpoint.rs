//! [`LocalEndpoint`] (one end of an in-process connection) and [`LocalRegion`]: work
//! requests carried out by the posting thread.

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::side::{Arrival, Pair, SERVER, Side};
use crate::memory::Buffer;
use crate::transport::regions::Local;
use crate::transport::waiting::{OpenConnection, Woken};
use crate::transport::{
    Completion, ConnectionEvent, Endpoint, Liveness, MemoryRegion, Result, SendOp, SendWr, Sge,
    TransportError, Waker, WcOpcode, WcStatus,
};

/// Most work requests in one post (a connection posts at most its 32 regions' writes and a
/// SEND at once).
const MAX_SEND_WR: usize = 64;
/// Bytes copied per access to a buffer's gate (an application thread locking the buffer
/// waits at most for one such chunk).
const CHUNK: usize = 1 << 20;
/// Spinning looks at the clock, the waker and the connection every this many rounds.
const SPIN_ROUNDS: u32 = 64;

/// A memory region registered with a [`LocalEndpoint`]; deregistered when dropped.
#[derive(Debug)]
pub struct LocalRegion {
    pair: Weak<Pair>,
    side: usize,
    key: u32,
    buffer: Buffer,
}

impl MemoryRegion for LocalRegion {
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

impl Drop for LocalRegion {
    fn drop(&mut self) {
        if let Some(pair) = self.pair.upgrade() {
            pair.sides[self.side]
                .regions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(self.key);
        }
    }
}

/// One end of an in-process connection ([`super::LocalTransport`]).
#[derive(Debug)]
pub struct LocalEndpoint {
    pair: Arc<Pair>,
    /// [`CLIENT`](super::side::CLIENT) or [`SERVER`].
    me: usize,
    /// Counted in the waiting decision's CPU demand while it lives.
    _open: OpenConnection,
}

impl LocalEndpoint {
    /// End `me` of `pair`.
    pub(super) fn new(pair: Arc<Pair>, me: usize) -> Self {
        let open = OpenConnection::new(Some(pair.addrs[me]), Some(pair.addrs[1 - me]));
        Self {
            pair,
            me,
            _open: open,
        }
    }

    /// The connection.
    pub(super) fn pair(&self) -> &Arc<Pair> {
        &self.pair
    }

    fn side(&self) -> &Side {
        &self.pair.sides[self.me]
    }

    fn peer(&self) -> &Side {
        &self.pair.sides[1 - self.me]
    }

    /// Resolves a local SGE against this end's regions.
    fn local(&self, sge: &Sge) -> Result<Local> {
        self.side()
            .regions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .local(sge)
    }

    /// Carries out one work request whose SGE resolved to `local`; the status of its
    /// completion.
    fn execute(&self, wr: &SendWr, local: Option<Local>) -> WcStatus {
        let result = match wr.op {
            SendOp::Send => {
                let data = match &local {
                    None => Ok(Vec::new()),
                    Some(l) => l.buffer.nic_read(l.offset, l.len, <[u8]>::to_vec),
                };
                match data {
                    Ok(data) => self.peer().arrive(Arrival::Send(data)).map(|()| 0),
                    Err(_) => Err(WcStatus::LocalProtection),
                }
            }
            SendOp::Write(remote) => self.write(remote, local.as_ref()),
            SendOp::WriteWithImm(remote, imm) => {
                self.write(remote, local.as_ref()).and_then(|len| {
                    self.peer().arrive(Arrival::WriteImm { len, imm })?;
                    Ok(len)
                })
            }
        };
        match result {
            Ok(_) => WcStatus::Success,
            Err(status) => status,
        }
    }

    /// Places `local`'s bytes at `remote` in the peer's memory; the length written.
    fn write(
        &self,
        remote: crate::transport::RemoteAddr,
        local: Option<&Local>,
    ) -> Result<u32, WcStatus> {
        let Some(src) = local else {
            return Ok(0);
        };
        let dst = self
            .peer()
            .regions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .target(remote, src.len as u32)
            .ok_or(WcStatus::RemoteAccess)?;
        copy(src, &dst)?;
        Ok(src.len as u32)
    }
}

/// Copies `src` to `dst` (equal lengths) in chunks: nothing when they are the same bytes.
fn copy(src: &Local, dst: &Local) -> Result<(), WcStatus> {
    let len = src.len;
    let (from, to) = (
        src.buffer.addr() + src.offset as u64,
        dst.buffer.addr() + dst.offset as u64,
    );
    if from == to || len == 0 {
        // One region used by both ends (an in-process NAA's region that is its client's).
        return Ok(());
    }
    let overlap = from < to + len as u64 && to < from + len as u64;
    if src.buffer.is(&dst.buffer) {
        // Two ranges of one buffer: one exclusive access to both.
        let (start, end) = (src.offset.min(dst.offset), src.offset.max(dst.offset) + len);
        let (s, d) = (src.offset - start, dst.offset - start);
        return dst
            .buffer
            .nic_write(start, end - start, |all| all.copy_within(s..s + len, d))
            .map_err(|_| WcStatus::RemoteAccess);
    }
    if overlap {
        // Two buffers over overlapping memory: through a copy, never two views at once.
        let bytes = src
            .buffer
            .nic_read(src.offset, len, <[u8]>::to_vec)
            .map_err(|_| WcStatus::LocalProtection)?;
        return dst
            .buffer
            .nic_write(dst.offset, len, |d| d.copy_from_slice(&bytes))
            .map_err(|_| WcStatus::RemoteAccess);
    }
    let mut done = 0;
    while done < len {
        let n = CHUNK.min(len - done);
        src.buffer
            .nic_read(src.offset + done, n, |s| {
                dst.buffer
                    .nic_write(dst.offset + done, n, |d| d.copy_from_slice(s))
                    .map_err(|_| WcStatus::RemoteAccess)
            })
            .map_err(|_| WcStatus::LocalProtection)??;
        done += n;
    }
    Ok(())
}

impl Endpoint for LocalEndpoint {
    type Region = LocalRegion;

    fn register(&mut self, buffer: &Buffer) -> Result<LocalRegion> {
        let mut regions = self
            .side()
            .regions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = regions.next_key()?;
        regions.insert(buffer, buffer.addr(), key)?;
        Ok(LocalRegion {
            pair: Arc::downgrade(&self.pair),
            side: self.me,
            key,
            buffer: buffer.clone(),
        })
    }

    fn post_recv(&mut self, wr_id: u64, buf: Option<Sge>) -> Result<()> {
        let buf = buf.map(|sge| self.local(&sge)).transpose()?;
        self.side().post_recv(wr_id, buf)
    }

    fn post_send(&mut self, wrs: &[SendWr]) -> Result<()> {
        if !self.side().is_connected() {
            return Err(TransportError::NotConnected);
        }
        if wrs.len() > MAX_SEND_WR {
            return Err(TransportError::InvalidRequest("send queue full"));
        }
        // All or nothing: every local SGE is resolved before the first request runs.
        let mut locals: heapless::Vec<Option<Local>, MAX_SEND_WR> = heapless::Vec::new();
        for wr in wrs {
            let local = wr.local.map(|sge| self.local(&sge)).transpose()?;
            // Cannot fail: `wrs` has at most MAX_SEND_WR entries.
            let _ = locals.push(local);
        }
        let mut failed = false;
        for (wr, local) in wrs.iter().zip(locals) {
            let status = if failed {
                WcStatus::WrFlush
            } else {
                self.execute(wr, local)
            };
            let opcode = match wr.op {
                SendOp::Send => WcOpcode::Send,
                SendOp::Write(_) | SendOp::WriteWithImm(..) => WcOpcode::RdmaWrite,
            };
            self.side().complete(Completion {
                wr_id: wr.wr_id,
                status,
                opcode,
                ..Completion::BLANK
            });
            if status != WcStatus::Success && !failed {
                // As on a queue pair: an error ends the connection, the rest is flushed.
                tracing::debug!(?status, "in-process transport: work request failed");
                failed = true;
            }
        }
        if failed {
            self.pair.break_up();
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut [Completion]) -> Result<usize> {
        Ok(self.side().poll(out))
    }

    fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.side().poll_event()
    }

    fn wait(&mut self, spin_until: Instant, deadline: Instant) -> Result<Woken> {
        let side = self.side();
        let start = Instant::now();
        if side.has_ready() {
            return Ok(Woken::Other);
        }
        if side.is_closed() {
            return Err(TransportError::NotConnected);
        }
        if side.take_woken() {
            return Ok(Woken::TimedOut(Duration::ZERO));
        }
        // Spin: watch the flag the peer sets.
        let spin_until = spin_until.min(deadline);
        let mut now = start;
        while now < spin_until {
            for _ in 0..SPIN_ROUNDS {
                std::hint::spin_loop();
                if side.has_ready() {
                    return Ok(Woken::Spun(start.elapsed()));
                }
            }
            if side.is_closed() {
                return Err(TransportError::NotConnected);
            }
            if side.take_woken() {
                return Ok(Woken::TimedOut(start.elapsed()));
            }
            now = Instant::now();
        }
        // Sleep on the bell, rung by the peer only while armed.
        let mut slept = false;
        loop {
            let must_look = side.arm();
            if side.has_ready() {
                let took = start.elapsed();
                return Ok(if slept {
                    Woken::Slept(took)
                } else {
                    Woken::Spun(took)
                });
            }
            if must_look && side.is_closed() {
                return Err(TransportError::NotConnected);
            }
            if side.take_woken() {
                return Ok(Woken::TimedOut(start.elapsed()));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Woken::TimedOut(now - start));
            }
            side.bell.sleep(Some(deadline - now));
            slept = true;
        }
    }

    fn arm_ready(&mut self) -> Result<bool> {
        Ok(self.side().arm())
    }

    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.side().bell.fd())
    }

    fn waker(&self) -> Option<Waker> {
        let pair = Arc::downgrade(&self.pair);
        let me = self.me;
        Some(Waker::new(move || {
            if let Some(pair) = pair.upgrade() {
                pair.sides[me].wake();
            }
        }))
    }

    fn shared_memory(&self, peer_addr: u64, len: usize) -> Option<Buffer> {
        if self.me != SERVER {
            return None;
        }
        // Only memory the buffer owns: the program's own memory (a C or NumPy array) must be
        // the program's again as soon as a cancel or a timeout returns, and a kernel still
        // running could not give it back; it gets the NAA's memory, copied in and out.
        self.peer()
            .regions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .exactly(peer_addr, len)
            .filter(|b| !b.is_foreign())
            .cloned()
    }

    fn liveness(&self) -> Option<Liveness> {
        let pair = Arc::downgrade(&self.pair);
        let me = self.me;
        Some(Liveness::new(move || {
            pair.upgrade().is_none_or(|pair| pair.sides[me].is_closed())
        }))
    }

    fn disconnect(&mut self) {
        self.pair.break_up();
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        Some(self.pair.addrs[1 - self.me])
    }
}

impl Drop for LocalEndpoint {
    fn drop(&mut self) {
        self.pair.break_up();
        if self.me == SERVER {
            self.pair.settle(super::side::Setup::Rejected(
                "the NAA closed the request".into(),
            ));
        }
    }
}
