//! The region table of one queue pair (software and in-process transports): memory keys, and
//! the resolution of local SGEs and remote targets (rkey, bounds, access) into validated
//! [`Local`] ranges.

use rustc_hash::FxHashMap;

use crate::memory::Buffer;
use crate::transport::{RemoteAddr, Result, Sge, TransportError};

/// A validated range of registered memory.
#[derive(Clone, Debug)]
pub(crate) struct Local {
    /// The registered buffer.
    pub(crate) buffer: Buffer,
    /// Offset of the first byte in the buffer.
    pub(crate) offset: usize,
    /// Length.
    pub(crate) len: usize,
}

/// A registered region: the buffer and the address it is known by.
#[derive(Clone, Debug)]
struct Registered {
    buffer: Buffer,
    addr: u64,
}

/// Registered regions by key (lkey = rkey).
///
/// Looked up on every post and every incoming write, so hashed with Fx: the keys are this
/// endpoint's own salted ones and the table holds a connection's few regions, so a peer
/// choosing the rkeys it sends can cause no costly collisions, and SipHash was a visible share
/// of a small RPC's instructions.
#[derive(Debug)]
pub(crate) struct Regions {
    table: FxHashMap<u32, Registered>,
    /// Registrations so far (key generator).
    registrations: u32,
    /// Per-endpoint salt of the generated keys.
    salt: u32,
}

impl Regions {
    /// An empty table with a random key salt.
    pub(crate) fn new() -> Self {
        Self {
            table: FxHashMap::default(),
            registrations: 0,
            salt: key_salt(),
        }
    }

    /// A fresh generated key (skipping keys taken by [`Regions::insert`] with a chosen key).
    pub(crate) fn next_key(&mut self) -> Result<u32> {
        for _ in 0..4 {
            self.registrations = self.registrations.wrapping_add(1);
            let key = self.salt ^ self.registrations.wrapping_mul(0x9E37_79B1);
            if !self.table.contains_key(&key) {
                return Ok(key);
            }
        }
        Err(TransportError::InvalidRequest("memory keys exhausted"))
    }

    /// Registers `buffer` as `addr .. addr + len` under `key`.
    pub(crate) fn insert(&mut self, buffer: &Buffer, addr: u64, key: u32) -> Result<()> {
        if buffer.is_empty() {
            return Err(TransportError::InvalidRequest("zero-length buffer"));
        }
        if addr.checked_add(buffer.len() as u64).is_none() {
            return Err(TransportError::InvalidRequest("region address range wraps"));
        }
        if self.table.contains_key(&key) {
            return Err(TransportError::InvalidRequest("memory key in use"));
        }
        let buffer = buffer.clone();
        self.table.insert(key, Registered { buffer, addr });
        Ok(())
    }

    /// Deregisters `key`.
    pub(crate) fn remove(&mut self, key: u32) {
        self.table.remove(&key);
    }

    /// The registered buffer that is exactly `addr .. addr + len`, if there is one.
    pub(crate) fn exactly(&self, addr: u64, len: usize) -> Option<&Buffer> {
        self.table
            .values()
            .find(|r| r.addr == addr && r.buffer.len() == len)
            .map(|r| &r.buffer)
    }

    /// `len` bytes at `addr` of region `key`, if the range lies inside it.
    fn range(&self, key: u32, addr: u64, len: u32) -> Option<Local> {
        self.table.get(&key)?.range(addr, len)
    }

    /// Resolves a local SGE (post time).
    pub(crate) fn local(&self, sge: &Sge) -> Result<Local> {
        let region = self
            .table
            .get(&sge.lkey)
            .ok_or(TransportError::InvalidRequest("unknown lkey"))?;
        region
            .range(sge.addr, sge.len)
            .ok_or(TransportError::InvalidRequest("SGE outside its region"))
    }

    /// Resolves the target of an incoming RDMA WRITE: known rkey, in bounds, and not held by
    /// the application. `None` means remote access error.
    pub(crate) fn target(&self, remote: RemoteAddr, len: u32) -> Option<Local> {
        self.range(remote.rkey, remote.addr, len)
            .filter(|l| !l.buffer.is_app_locked())
    }
}

impl Registered {
    /// `len` bytes at `addr`, if the range lies inside the region.
    fn range(&self, addr: u64, len: u32) -> Option<Local> {
        let offset = usize::try_from(addr.checked_sub(self.addr)?).ok()?;
        let len = len as usize;
        (offset.checked_add(len)? <= self.buffer.len()).then(|| Local {
            buffer: self.buffer.clone(),
            offset,
            len,
        })
    }
}

/// A per-endpoint random salt for memory keys (so that keys of different endpoints differ).
fn key_salt() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x6e61_6169_6365);
    h.finish() as u32
}
