//! Handle tables: what a C program holds is an identifier into a table, never a pointer to
//! library memory, so a stale, copied or forged handle is looked up and refused instead of
//! being dereferenced.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Live objects by identifier. Identifiers start at 1 (0 is C's NULL) and are never reused.
pub(crate) struct Handles<T> {
    next: AtomicUsize,
    live: Mutex<BTreeMap<usize, Arc<T>>>,
}

impl<T> Handles<T> {
    /// An empty table.
    pub(crate) const fn new() -> Self {
        Self {
            next: AtomicUsize::new(1),
            live: Mutex::new(BTreeMap::new()),
        }
    }

    fn live(&self) -> MutexGuard<'_, BTreeMap<usize, Arc<T>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `value`; returns its identifier.
    pub(crate) fn insert(&self, value: T) -> usize {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.live().insert(id, Arc::new(value));
        id
    }

    /// The object for `id`, if it is live.
    pub(crate) fn get(&self, id: usize) -> Option<Arc<T>> {
        self.live().get(&id).cloned()
    }

    /// Removes `id`; returns the object if it was live.
    pub(crate) fn remove(&self, id: usize) -> Option<Arc<T>> {
        self.live().remove(&id)
    }

    /// Number of live objects.
    pub(crate) fn len(&self) -> usize {
        self.live().len()
    }
}

/// The C pointer that stands for identifier `id` (never dereferenced).
pub(crate) fn as_ptr<P>(id: usize) -> *mut P {
    std::ptr::without_provenance_mut(id)
}

/// The identifier a C pointer stands for.
pub(crate) fn id_of<P>(ptr: *const P) -> usize {
    ptr.addr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_removal_is_final() {
        let h: Handles<u32> = Handles::new();
        let a = h.insert(1);
        let b = h.insert(2);
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(h.len(), 2);
        assert_eq!(h.get(a).as_deref(), Some(&1));
        assert_eq!(h.remove(a).as_deref(), Some(&1));
        assert!(h.remove(a).is_none());
        assert!(h.get(a).is_none());
        assert!(h.get(12345).is_none());
        let c = h.insert(3);
        assert!(c > b, "identifiers are not reused");
        assert_eq!(id_of(as_ptr::<u8>(c)), c);
    }
}
