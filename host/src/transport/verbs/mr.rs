//! Memory regions ([`VerbsRegion`]) and the table of live registrations an endpoint checks
//! its scatter/gather elements against.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::sys::{ibv_access_flags, ibv_dereg_mr, ibv_mr, ibv_reg_mr};
use rustc_hash::FxHashMap;

use super::pd::ProtectionDomain;
use super::{Result, TransportError, os_error};
use crate::memory::Buffer;
use crate::transport::{MemoryRegion, Sge};

/// The live registrations of an endpoint: lkey → (address, length).
///
/// Checked on every posted SGE, so keyed with Fx hashing: lkeys come from the provider, not
/// from a peer, so the table needs no protection against chosen collisions, and SipHash was
/// a visible share of a small RPC's instructions.
#[derive(Debug, Default)]
pub(super) struct KeyTable {
    regions: Mutex<FxHashMap<u32, (u64, usize)>>,
    /// Counts removals: a [`KeyCache`] entry taken at an unchanged count is still live.
    removals: AtomicU64,
}

/// The registration an endpoint last found in its [`KeyTable`]: the next SGE with the same
/// lkey is checked against it without the table's lock and lookup, until a registration is
/// removed (a small RPC posts from the same region every time).
#[derive(Debug, Default)]
pub(super) struct KeyCache(Option<CachedKey>);

#[derive(Clone, Copy, Debug)]
struct CachedKey {
    lkey: u32,
    addr: u64,
    len: usize,
    removals: u64,
}

impl KeyTable {
    /// Checks that `sge` lies inside a live registration.
    #[cfg(test)]
    pub(super) fn check(&self, sge: &Sge) -> Result<()> {
        let (addr, len) = self.lookup(sge.lkey)?;
        inside(sge, addr, len)
    }

    /// Checks that `sge` lies inside a live registration, through `cache`.
    pub(super) fn check_cached(&self, sge: &Sge, cache: &mut KeyCache) -> Result<()> {
        // Read before the lookup: a removal after it makes the entry stale for the next check.
        let removals = self.removals.load(Ordering::Acquire);
        let (addr, len) = match cache.0 {
            Some(c) if c.lkey == sge.lkey && c.removals == removals => (c.addr, c.len),
            _ => {
                let (addr, len) = self.lookup(sge.lkey)?;
                cache.0 = Some(CachedKey {
                    lkey: sge.lkey,
                    addr,
                    len,
                    removals,
                });
                (addr, len)
            }
        };
        inside(sge, addr, len)
    }

    fn lookup(&self, lkey: u32) -> Result<(u64, usize)> {
        let regions = self.regions.lock().unwrap_or_else(PoisonError::into_inner);
        regions
            .get(&lkey)
            .copied()
            .ok_or(TransportError::InvalidRequest("unknown lkey"))
    }

    fn insert(&self, lkey: u32, addr: u64, len: usize) {
        let mut regions = self.regions.lock().unwrap_or_else(PoisonError::into_inner);
        regions.insert(lkey, (addr, len));
    }

    fn remove(&self, lkey: u32) {
        let mut regions = self.regions.lock().unwrap_or_else(PoisonError::into_inner);
        regions.remove(&lkey);
        self.removals.fetch_add(1, Ordering::Release);
    }
}

/// `Ok` if `sge` lies inside the `len` bytes from `addr`.
fn inside(sge: &Sge, addr: u64, len: usize) -> Result<()> {
    let inside = sge
        .addr
        .checked_sub(addr)
        .and_then(|offset| offset.checked_add(u64::from(sge.len)))
        .is_some_and(|end| end <= len as u64);
    if inside {
        Ok(())
    } else {
        Err(TransportError::InvalidRequest("SGE outside its region"))
    }
}

/// A [`Buffer`] registered for local write and remote write (spec §1.1); deregistered when
/// dropped. It holds the buffer (so the memory lives while registered) and the protection
/// domain.
#[derive(Debug)]
pub struct VerbsRegion {
    raw: NonNull<ibv_mr>,
    lkey: u32,
    rkey: u32,
    buffer: Buffer,
    keys: Weak<KeyTable>,
    _pd: Arc<ProtectionDomain>,
}

// SAFETY: libibverbs MR calls are thread-safe; the MR is only read (keys cached) and
// deregistered once in `Drop`.
unsafe impl Send for VerbsRegion {}

impl VerbsRegion {
    /// Registers `buffer` on `pd` and records it in `keys`.
    pub(super) fn register(
        pd: &Arc<ProtectionDomain>,
        keys: &Arc<KeyTable>,
        buffer: &Buffer,
    ) -> Result<Self> {
        if buffer.is_empty() {
            return Err(TransportError::InvalidRequest("zero-length buffer"));
        }
        let access = (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE)
            .0 as i32;
        // SAFETY: the PD is live; `buffer.addr()` is valid for `buffer.len()` bytes for as long
        // as the buffer lives, and this region holds a clone of it until after deregistration,
        // so the NIC never accesses freed memory.
        let raw = unsafe {
            ibv_reg_mr(
                pd.as_ptr(),
                buffer.addr() as usize as *mut libc::c_void,
                buffer.len(),
                access,
            )
        };
        let raw = NonNull::new(raw).ok_or_else(|| os_error("ibv_reg_mr"))?;
        // SAFETY: a registered MR; its keys are fixed for its life.
        let (lkey, rkey) = unsafe { ((*raw.as_ptr()).lkey, (*raw.as_ptr()).rkey) };
        keys.insert(lkey, buffer.addr(), buffer.len());
        tracing::trace!(
            lkey,
            rkey,
            addr = buffer.addr(),
            len = buffer.len(),
            "verbs: register"
        );
        Ok(Self {
            raw,
            lkey,
            rkey,
            buffer: buffer.clone(),
            keys: Arc::downgrade(keys),
            _pd: Arc::clone(pd),
        })
    }
}

impl MemoryRegion for VerbsRegion {
    fn lkey(&self) -> u32 {
        self.lkey
    }
    fn rkey(&self) -> u32 {
        self.rkey
    }
    fn buffer(&self) -> &Buffer {
        &self.buffer
    }
}

impl Drop for VerbsRegion {
    fn drop(&mut self) {
        if let Some(keys) = self.keys.upgrade() {
            keys.remove(self.lkey);
        }
        // SAFETY: registered by `ibv_reg_mr`, deregistered once; the buffer (a field) is
        // dropped only after this.
        let rc = unsafe { ibv_dereg_mr(self.raw.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_dereg_mr failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sges_must_lie_inside_a_live_registration() {
        let keys = KeyTable::default();
        keys.insert(5, 0x1000, 256);
        let sge = |addr, len, lkey| Sge { addr, len, lkey };
        assert!(keys.check(&sge(0x1000, 256, 5)).is_ok());
        assert!(keys.check(&sge(0x10ff, 1, 5)).is_ok());
        assert!(keys.check(&sge(0x1100, 0, 5)).is_ok());
        for bad in [
            sge(0x1000, 257, 5),
            sge(0x0fff, 1, 5),
            sge(0x1100, 1, 5),
            sge(u64::MAX, 2, 5),
            sge(0x1000, 1, 6),
        ] {
            assert!(
                matches!(keys.check(&bad), Err(TransportError::InvalidRequest(_))),
                "{bad:?}"
            );
        }
        keys.remove(5);
        assert!(keys.check(&sge(0x1000, 1, 5)).is_err(), "deregistered");
    }

    #[test]
    fn the_cache_answers_like_the_table_also_after_a_removal() {
        let keys = KeyTable::default();
        let mut cache = KeyCache::default();
        let sge = |addr, len, lkey| Sge { addr, len, lkey };
        keys.insert(5, 0x1000, 256);
        keys.insert(7, 0x9000, 16);
        assert!(keys.check_cached(&sge(0x1000, 256, 5), &mut cache).is_ok());
        assert!(keys.check_cached(&sge(0x1000, 257, 5), &mut cache).is_err());
        assert!(keys.check_cached(&sge(0x9000, 16, 7), &mut cache).is_ok());
        assert!(keys.check_cached(&sge(0x1000, 1, 5), &mut cache).is_ok());
        keys.remove(5);
        assert!(
            keys.check_cached(&sge(0x1000, 1, 5), &mut cache).is_err(),
            "a removal invalidates the cached registration"
        );
        // The provider may hand the same lkey out again, for other memory.
        keys.insert(5, 0x4000, 8);
        assert!(keys.check_cached(&sge(0x1000, 1, 5), &mut cache).is_err());
        assert!(keys.check_cached(&sge(0x4000, 8, 5), &mut cache).is_ok());
        keys.remove(7);
        assert!(keys.check_cached(&sge(0x4000, 8, 5), &mut cache).is_ok());
        assert!(keys.check_cached(&sge(0x9000, 1, 7), &mut cache).is_err());
    }
}
