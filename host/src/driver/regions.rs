//! The memory a driver owns: the MRSP message buffers and the region memory by id.

use naaice_core::RegionId;
use naaice_core::config::MRSP_RECV_LEN;

use super::{Driver, Role};
use crate::memory::Buffer;
use crate::transport::{Endpoint, MemoryRegion, Result, Sge};

/// Memory behind a region id.
#[derive(Debug)]
pub(crate) enum RegionMemory<R> {
    /// Registered for remote write.
    Registered(R),
    /// Registered for remote write, and the in-process client's own memory
    /// ([`Endpoint::shared_memory`]).
    Shared(R),
    /// NAA-only memory (internal region), not registered.
    Internal(Buffer),
}

impl<R: MemoryRegion> RegionMemory<R> {
    fn buffer(&self) -> &Buffer {
        match self {
            Self::Registered(r) | Self::Shared(r) => r.buffer(),
            Self::Internal(b) => b,
        }
    }
}

/// The registered MRSP send and receive buffers of a connection.
pub(crate) struct MessageBuffers<R> {
    pub(super) send: R,
    pub(super) recv: R,
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
        sge(&self.recv, MRSP_RECV_LEN)
    }
}

/// The first `len` bytes of `mr` as a scatter/gather element.
pub(super) fn sge<R: MemoryRegion>(mr: &R, len: usize) -> Sge {
    Sge {
        addr: mr.addr(),
        len: len as u32,
        lkey: mr.lkey(),
    }
}

impl<E: Endpoint, M: Role> Driver<E, M> {
    /// Registers `buffer` for remote write and stores it as the memory of region `id`, kept
    /// as `kind` says; returns its address and rkey.
    pub(super) fn register_region(
        &mut self,
        id: RegionId,
        buffer: &Buffer,
        kind: fn(E::Region) -> RegionMemory<E::Region>,
    ) -> Result<(u64, u32)> {
        let mr = self.ep.register(buffer)?;
        let keys = (mr.addr(), mr.rkey());
        self.set_region(id, kind(mr));
        Ok(keys)
    }

    /// The indices of the regions whose memory is the in-process client's.
    pub(crate) fn shared_regions(&self) -> impl Iterator<Item = usize> + '_ {
        self.regions
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m, Some(RegionMemory::Shared(_))))
            .map(|(i, _)| i)
    }

    pub(super) fn set_region(&mut self, id: RegionId, mem: RegionMemory<E::Region>) {
        let i = id.index();
        if self.regions.len() <= i {
            self.regions.resize_with(i + 1, || None);
        }
        self.regions[i] = Some(mem);
    }

    /// The memory of the regions that is the NAA's own (not the in-process client's), for
    /// the next connections once this one is gone.
    pub(crate) fn own_region_memory(&self) -> Vec<Buffer> {
        self.regions
            .iter()
            .flatten()
            .filter(|m| !matches!(m, RegionMemory::Shared(_)))
            .map(|m| m.buffer().clone())
            .collect()
    }

    /// The buffer of region `id`.
    pub(crate) fn region_buffer(&self, id: RegionId) -> Option<&Buffer> {
        self.regions
            .get(id.index())?
            .as_ref()
            .map(RegionMemory::buffer)
    }

    /// The registered region `index`, for a WRITE from it.
    pub(super) fn registered(&self, index: usize) -> Option<&E::Region> {
        match self.regions.get(index) {
            Some(Some(RegionMemory::Registered(r) | RegionMemory::Shared(r))) => Some(r),
            _ => None,
        }
    }
}
