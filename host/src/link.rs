//! The runtime under both roles: executes the core machines' actions on a transport endpoint
//! and feeds completions and connection events back (quinn's `ConnectionDriver`, without
//! async).

use std::time::Instant;

use naaice_core::RegionId;
use naaice_core::config::MRSP_RECV_LEN;
use naaice_core::machine::{Input, Machine, MachineAction, Post, RecvBuffer, WorkError, Write};

use crate::clock;
use crate::memory::Buffer;
use crate::transport::{
    Completion, ConnectionEvent, Endpoint, MemoryRegion, RemoteAddr, Result, SendOp, SendWr, Sge,
    TransportError, WcOpcode, WcStatus,
};

/// Memory behind a region id.
#[derive(Debug)]
pub(crate) enum RegionMemory<R> {
    /// Registered for remote write.
    Registered(R),
    /// NAA-only memory (internal region), not registered.
    Internal(Buffer),
}

impl<R: MemoryRegion> RegionMemory<R> {
    pub(crate) fn buffer(&self) -> &Buffer {
        match self {
            Self::Registered(r) => r.buffer(),
            Self::Internal(b) => b,
        }
    }
}

/// The registered MRSP send and receive buffers of a connection.
pub(crate) struct MessageBuffers<R> {
    send: R,
    recv: R,
}

impl<R: MemoryRegion> MessageBuffers<R> {
    /// Registers both buffers on `ep`.
    pub(crate) fn register<E: Endpoint<Region = R>>(ep: &mut E) -> Result<Self> {
        let send = ep.register(&Buffer::zeroed(MRSP_RECV_LEN))?;
        let recv = ep.register(&Buffer::zeroed(MRSP_RECV_LEN))?;
        Ok(Self { send, recv })
    }

    /// The receive buffer as a scatter/gather element.
    pub(crate) fn recv_sge(&self) -> Sge {
        Sge {
            addr: self.recv.addr(),
            len: MRSP_RECV_LEN as u32,
            lkey: self.recv.lkey(),
        }
    }
}

/// An endpoint plus what the protocol needs around it: the MRSP message buffers, the region
/// memory by id, and reusable scratch space (no allocation per RPC).
pub(crate) struct Link<E: Endpoint> {
    pub(crate) ep: E,
    send_mr: E::Region,
    recv_mr: E::Region,
    pub(crate) regions: Vec<Option<RegionMemory<E::Region>>>,
    scratch: Box<[u8]>,
    writes: Vec<SendWr>,
    completions: Vec<Completion>,
    connected: bool,
}

const COMPLETION_BATCH: usize = 64;

impl<E: Endpoint> Link<E> {
    /// Registers the MRSP buffers on `ep` and wraps it.
    pub(crate) fn new(mut ep: E) -> Result<Self> {
        let buffers = MessageBuffers::register(&mut ep)?;
        Ok(Self::from_parts(ep, buffers))
    }

    /// Wraps an endpoint whose message buffers are already registered (the server registers
    /// them and posts its first receive before accepting).
    pub(crate) fn from_parts(ep: E, buffers: MessageBuffers<E::Region>) -> Self {
        let blank = Completion {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            byte_len: 0,
            imm: None,
        };
        Self {
            ep,
            send_mr: buffers.send,
            recv_mr: buffers.recv,
            regions: Vec::new(),
            scratch: vec![0; MRSP_RECV_LEN].into_boxed_slice(),
            writes: Vec::with_capacity(naaice_core::config::MAX_REGIONS),
            completions: vec![blank; COMPLETION_BATCH],
            connected: false,
        }
    }

    /// True once the connection was established and has not broken since.
    pub(crate) fn is_connected(&self) -> bool {
        self.connected
    }

    /// Marks the connection established (connect or accept returned).
    pub(crate) fn set_connected(&mut self) {
        self.connected = true;
    }

    /// Stores the memory of region `id`.
    pub(crate) fn set_region(&mut self, id: RegionId, mem: RegionMemory<E::Region>) {
        let i = id.index();
        if self.regions.len() <= i {
            self.regions.resize_with(i + 1, || None);
        }
        self.regions[i] = Some(mem);
    }

    /// The buffer of region `id`.
    pub(crate) fn region_buffer(&self, id: RegionId) -> Option<&Buffer> {
        self.regions
            .get(id.index())?
            .as_ref()
            .map(RegionMemory::buffer)
    }

    /// Posts the machine's work requests until it has none left or an action needs the
    /// caller (allocate, run kernel, MRSP/RPC complete, disconnect, failed), which is returned.
    pub(crate) fn drive<M: Machine>(&mut self, m: &mut M) -> Option<M::Action> {
        loop {
            let Some(action) = m.poll_action(&mut self.scratch) else {
                self.flush_writes(m);
                return None;
            };
            let Some(post) = action.post() else {
                self.flush_writes(m);
                return Some(action);
            };
            if let Post::Write(w) = post {
                self.queue_write(m, w);
                continue;
            }
            self.flush_writes(m);
            match post {
                Post::Recv { wr_id, buffer } => {
                    let sge = match buffer {
                        RecvBuffer::Message => Some(self.sge(&self.recv_mr, MRSP_RECV_LEN)),
                        RecvBuffer::Empty => None,
                    };
                    if let Err(e) = self.ep.post_recv(wr_id.raw(), sge) {
                        tracing::warn!(error = %e, "posting a receive failed");
                        m.handle_input(clock::now(), Input::PostFailed(wr_id));
                    }
                }
                Post::Send { wr_id, len } => {
                    let copied = self.send_mr.buffer().try_lock().map(|mut g| {
                        g[..len].copy_from_slice(&self.scratch[..len]);
                    });
                    let wr = SendWr {
                        wr_id: wr_id.raw(),
                        op: SendOp::Send,
                        local: Some(self.sge(&self.send_mr, len)),
                        solicited: true,
                    };
                    if copied.is_none() || self.ep.post_send(&[wr]).is_err() {
                        m.handle_input(clock::now(), Input::PostFailed(wr_id));
                    }
                }
                Post::Write(_) => {}
            }
        }
    }

    fn sge(&self, mr: &E::Region, len: usize) -> Sge {
        Sge {
            addr: mr.addr(),
            len: len as u32,
            lkey: mr.lkey(),
        }
    }

    fn queue_write<M: Machine>(&mut self, m: &mut M, w: Write) {
        let local = if w.len == 0 {
            None
        } else {
            match self.regions.get(w.region.index()) {
                Some(Some(RegionMemory::Registered(r))) => Some(Sge {
                    addr: r.addr(),
                    len: w.len,
                    lkey: r.lkey(),
                }),
                _ => {
                    tracing::error!(
                        region = w.region.index(),
                        "write from a region without memory"
                    );
                    m.handle_input(clock::now(), Input::PostFailed(w.wr_id));
                    return;
                }
            }
        };
        let remote = RemoteAddr {
            addr: w.remote_addr,
            rkey: w.rkey,
        };
        let op = match w.imm {
            Some(imm) => SendOp::WriteWithImm(remote, imm),
            None => SendOp::Write(remote),
        };
        self.writes.push(SendWr {
            wr_id: w.wr_id.raw(),
            op,
            local,
            solicited: w.solicited,
        });
    }

    /// Posts the queued writes as one list (spec §3.1).
    fn flush_writes<M: Machine>(&mut self, m: &mut M) {
        if self.writes.is_empty() {
            return;
        }
        if let Err(e) = self.ep.post_send(&self.writes) {
            tracing::warn!(error = %e, "posting writes failed");
            let first = naaice_core::machine::WrId::from_raw(self.writes[0].wr_id);
            m.handle_input(clock::now(), Input::PostFailed(first));
        }
        self.writes.clear();
    }

    /// Feeds every ready completion and connection event to the machine. Never blocks.
    /// Returns how many inputs were fed.
    pub(crate) fn pump<M: Machine>(&mut self, m: &mut M) -> Result<usize> {
        let mut fed = 0;
        while let Some(event) = self.ep.poll_event() {
            // `Established` is fed by the owner when connect/accept returns; the event only
            // updates the flag, so it is never fed twice.
            match event {
                ConnectionEvent::Established => self.connected = true,
                ConnectionEvent::Disconnected => {
                    self.connected = false;
                    m.handle_input(clock::now(), Input::Disconnected);
                    fed += 1;
                }
            }
        }
        loop {
            let n = self.ep.poll(&mut self.completions)?;
            for i in 0..n {
                let wc = self.completions[i];
                self.feed_completion(m, wc);
            }
            fed += n;
            if n < self.completions.len() {
                break;
            }
        }
        m.handle_timeout(clock::now());
        Ok(fed)
    }

    fn feed_completion<M: Machine>(&mut self, m: &mut M, wc: Completion) {
        let wr_id = naaice_core::machine::WrId::from_raw(wc.wr_id);
        let now = clock::now();
        if wc.status != WcStatus::Success {
            let error = work_error(wc.status);
            tracing::debug!(wr_id = wc.wr_id, ?error, "work request failed");
            return m.handle_input(now, Input::WorkFailed { wr_id, error });
        }
        match wc.opcode {
            WcOpcode::Send => m.handle_input(now, Input::SendCompleted(wr_id)),
            WcOpcode::RdmaWrite => m.handle_input(now, Input::WriteCompleted(wr_id)),
            WcOpcode::RecvRdmaWithImm => {
                let input = Input::WriteImmReceived {
                    wr_id,
                    imm: wc.imm.unwrap_or(0),
                    len: wc.byte_len,
                };
                m.handle_input(now, input);
            }
            WcOpcode::Recv => {
                let len = (wc.byte_len as usize).min(MRSP_RECV_LEN);
                let mut msg = [0u8; MRSP_RECV_LEN];
                let copied = self
                    .recv_mr
                    .buffer()
                    .try_lock()
                    .map(|g| msg[..len].copy_from_slice(&g[..len]));
                let input = match copied {
                    Some(()) => Input::Received {
                        wr_id,
                        data: &msg[..len],
                    },
                    None => Input::WorkFailed {
                        wr_id,
                        error: WorkError::LocalProtection,
                    },
                };
                m.handle_input(now, input);
            }
        }
    }

    /// Blocks until something is ready, the machine's next deadline, or `deadline`.
    pub(crate) fn wait<M: Machine>(&mut self, m: &M, deadline: Instant) -> Result<()> {
        let until = match m.poll_timeout() {
            Some(t) => clock::from_core(t).min(deadline),
            None => deadline,
        };
        match self.ep.wait(until) {
            Ok(_) => Ok(()),
            Err(TransportError::NotConnected) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn work_error(status: WcStatus) -> WorkError {
    match status {
        WcStatus::LocalLength => WorkError::LocalLength,
        WcStatus::LocalProtection => WorkError::LocalProtection,
        WcStatus::WrFlush => WorkError::Flushed,
        WcStatus::RemoteAccess => WorkError::RemoteAccess,
        WcStatus::RemoteInvalidRequest => WorkError::RemoteInvalidRequest,
        WcStatus::RnrRetryExceeded => WorkError::RnrRetryExceeded,
        WcStatus::RetryExceeded => WorkError::RetryExceeded,
        WcStatus::Success | WcStatus::General => WorkError::Other,
    }
}
