//! Client-side commands of a driver (the AP1 connection's engine).

use naaice_core::{Client, ClientConfig, ClientRegions, RegionId};

use super::regions::RegionMemory;
use super::{Driver, MessageBuffers};
use crate::error::Result;
use crate::memory::Buffer;
use crate::transport::waiting::WaitPolicy;
use crate::transport::{Endpoint, MemoryRegion};

impl<E: Endpoint> Driver<E, Client> {
    /// Takes over a connected endpoint for a client with `config` whose waits follow
    /// `wait`: registers the message buffers.
    pub(crate) fn client(mut ep: E, config: ClientConfig, wait: WaitPolicy) -> Result<Self> {
        let buffers = MessageBuffers::register(&mut ep)?;
        let client = Client::new(config, ClientRegions::new());
        Ok(Self::established(ep, buffers, client, wait))
    }

    /// Registers `buffer` and adds it as the next parameter region (no flags yet).
    pub(crate) fn add_param(&mut self, buffer: &Buffer) -> Result<RegionId> {
        let regions = self.machine.regions_mut()?;
        if regions.record_count() >= naaice_core::config::MAX_REGIONS {
            return Err(naaice_core::region::RegionError::Full.into());
        }
        let mr = self.ep.register(buffer)?;
        let id = regions.add_param(mr.addr(), mr.rkey(), buffer.len() as u64)?;
        self.set_region(id, RegionMemory::Registered(mr));
        Ok(id)
    }
}
