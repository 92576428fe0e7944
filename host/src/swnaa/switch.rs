//! Kernels that can be replaced while the NAA serves: the reload of `naaice-swnaa`'s kernels
//! file on SIGHUP.
//!
//! Workers look at the switch between RPCs (one relaxed atomic load per pass): a kernel
//! running when the kernels are replaced finishes on the old ones, the connection's next
//! call runs on the new ones. The old kernels (and the libraries they came from) are dropped
//! when the last worker lets go of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use super::kernel::KernelRegistry;

/// The kernels a software NAA serves now; cloned handles share them (see
/// [`SoftNaa::kernel_switch`](super::SoftNaa::kernel_switch)).
#[derive(Clone)]
pub struct KernelSwitch {
    inner: Arc<Inner>,
}

struct Inner {
    current: RwLock<Arc<KernelRegistry>>,
    /// Bumped by every replacement, so that workers notice it without the lock.
    generation: AtomicU64,
}

impl std::fmt::Debug for KernelSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSwitch")
            .field("generation", &self.inner.generation.load(Ordering::Relaxed))
            .field("current", &self.current())
            .finish()
    }
}

impl KernelSwitch {
    /// A switch serving `kernels`.
    pub fn new(kernels: KernelRegistry) -> Self {
        Self {
            inner: Arc::new(Inner {
                current: RwLock::new(Arc::new(kernels)),
                generation: AtomicU64::new(0),
            }),
        }
    }

    /// The kernels served now.
    pub fn current(&self) -> Arc<KernelRegistry> {
        Arc::clone(
            &self
                .inner
                .current
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Serves `kernels` from every connection's next call on; returns the kernels served
    /// until now (RPCs running on them keep them alive until they finish).
    pub fn replace(&self, kernels: KernelRegistry) -> Arc<KernelRegistry> {
        let mut current = self
            .inner
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let old = std::mem::replace(&mut *current, Arc::new(kernels));
        self.inner.generation.fetch_add(1, Ordering::Release);
        old
    }

    /// The kernels to serve when they changed since `seen` (which is updated), else `None`.
    pub(crate) fn changed(&self, seen: &mut u64) -> Option<Arc<KernelRegistry>> {
        let now = self.inner.generation.load(Ordering::Acquire);
        if now == *seen {
            return None;
        }
        *seen = now;
        Some(self.current())
    }

    /// The generation of the kernels served now (with [`KernelSwitch::current`] read after
    /// it, a worker's starting point for [`KernelSwitch::changed`]).
    pub(crate) fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_is_seen_once_and_the_old_kernels_stay_alive_while_held() {
        let switch = KernelSwitch::new(KernelRegistry::builtin());
        let mut seen = switch.generation();
        let held = switch.current();
        assert!(switch.changed(&mut seen).is_none());
        let old = switch.replace(KernelRegistry::empty());
        assert!(Arc::ptr_eq(&old, &held), "the old kernels are handed back");
        let now = switch.changed(&mut seen).expect("a change");
        assert_eq!(now.served().count(), 0);
        assert!(switch.changed(&mut seen).is_none(), "seen once");
        assert_eq!(held.describe(), "1 add1, 2 add2, 3 empty");
    }
}
