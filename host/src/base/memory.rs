//! Buffers that a transport may read and write like a NIC does, made safe.
//!
//! RDMA memory is written by the NIC without the application's involvement. Here the "NIC" is a
//! transport's background threads, and every [`Buffer`] carries an *access gate* so that those
//! accesses can never race with the application, even against a buggy or hostile peer:
//!
//! * The application gets exclusive access with [`Buffer::lock`] / [`Buffer::try_lock`]. `lock`
//!   waits for NIC accesses already in progress (they are short: transports access memory in
//!   chunks), then holds the gate until the [`BufferGuard`] is dropped.
//! * While an application guard is held, every NIC access **fails** instead of waiting; the
//!   transport turns that into a protection error (like a NIC hitting an invalid region).
//! * NIC writers are exclusive against every other access; NIC readers share with each other.
//!
//! The gate is one atomic state word: bit 31 = "the application holds the buffer", bit 30 = "a
//! NIC writer is active", bits 29..0 = number of active NIC readers. Contention between
//! application threads is resolved by a mutex, so only the application side ever blocks on it.
//!
//! The crate denies `unsafe` code except in the modules that need it: this one (NIC-style
//! access to buffers), the verbs transport's FFI (`transport::verbs`) and the software
//! transport's socket options and `splice` (`transport::soft`); each block says why it is
//! sound.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

/// Bit of the state word: the application holds the buffer.
const APP: u32 = 1 << 31;
/// Bit of the state word: a NIC writer is active.
const WRITER: u32 = 1 << 30;
/// Mask of the state word: number of active NIC readers.
const READERS: u32 = WRITER - 1;

/// Why a NIC access to a [`Buffer`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inaccessible {
    /// The byte range does not lie inside the buffer.
    OutOfBounds,
    /// The application holds the buffer ([`Buffer::lock`]).
    Locked,
}

/// The shared allocation behind a [`Buffer`].
struct Inner {
    /// Start of the memory; never null, valid for `len` bytes. Owned memory comes from
    /// `Box<[u8]>::into_raw`; foreign memory from [`Buffer::from_raw_parts`].
    ptr: *mut u8,
    /// Length in bytes.
    len: usize,
    /// The access gate (see the module documentation).
    state: AtomicU32,
    /// Serialises application guards.
    app: Mutex<()>,
    /// True if `ptr` came from `Box::into_raw` and is freed on drop; false for foreign memory.
    owned: bool,
}

// SAFETY: `Inner` owns its allocation (like a `Box<[u8]>`, which is `Send`). The raw pointer is
// only dereferenced through the access gate, which guarantees that a `&mut [u8]` to any byte never
// coexists with any other reference to it, whichever thread holds it.
unsafe impl Send for Inner {}
// SAFETY: all shared access goes through the gate (an atomic state word plus a mutex), which
// enforces the aliasing rules across threads: application guard exclusive, NIC writer exclusive,
// NIC readers shared. Acquire/release on the state word orders the data accesses.
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.owned {
            // Foreign memory (`Buffer::from_raw_parts`) belongs to the caller.
            return;
        }
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
        // SAFETY: `ptr`/`len` came from `Box::into_raw` of a `Box<[u8]>` in `Buffer::from_vec`
        // and are freed exactly once, here, when the last `Arc<Inner>` goes away (no guard or
        // NIC access can be alive then, as they borrow a `Buffer`).
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// Memory that a transport may access like a NIC does (see the [module](self) documentation).
///
/// Cloning is cheap (reference-counted) and every clone refers to the same bytes. The address of
/// the bytes ([`Buffer::addr`]) is stable for the buffer's whole life.
#[derive(Clone)]
pub struct Buffer {
    inner: Arc<Inner>,
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len())
            .finish()
    }
}

impl Buffer {
    /// A buffer of `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        Self::from_vec(vec![0; len])
    }

    /// A buffer of `len` zero bytes, or `None` if the memory cannot be allocated. Large
    /// buffers come zeroed from the allocator (fresh pages from the kernel), not written
    /// byte by byte: their pages are first touched when used or registered.
    pub fn try_zeroed(len: usize) -> Option<Self> {
        if len == 0 {
            return Some(Self::zeroed(0));
        }
        let layout = std::alloc::Layout::array::<u8>(len).ok()?;
        // SAFETY: the layout's size is `len` > 0 bytes, as `alloc_zeroed` requires.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: `ptr` was allocated by the global allocator with the layout of `len` bytes
        // (alignment 1), all of them initialised (zero); the vector takes it over with
        // capacity and length `len`, so it frees it with the same layout.
        let data = unsafe { Vec::from_raw_parts(ptr, len, len) };
        Some(Self::from_vec(data))
    }

    /// A buffer that takes over `data`.
    pub fn from_vec(data: Vec<u8>) -> Self {
        Self::from_boxed(data.into_boxed_slice())
    }

    /// A buffer that takes over `boxed`.
    pub(crate) fn from_boxed(boxed: Box<[u8]>) -> Self {
        let len = boxed.len();
        let ptr = Box::into_raw(boxed).cast::<u8>();
        Self {
            inner: Arc::new(Inner {
                ptr,
                len,
                state: AtomicU32::new(0),
                app: Mutex::new(()),
                owned: true,
            }),
        }
    }

    /// A buffer over memory the caller owns (for example a C program's array), without
    /// copying. Dropping the last clone does not free it.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads and writes of `len` bytes, and must stay valid until the
    /// last clone of the returned buffer (and every registration of it) is dropped. While the
    /// buffer exists, the memory may be accessed only through it: nothing else may read or
    /// write it while a transport may access it (for an RPC buffer: from posting the RPC until
    /// its completion). If several buffers cover the same memory, it must not be written
    /// through one of them while another one may access it.
    pub unsafe fn from_raw_parts(ptr: std::ptr::NonNull<u8>, len: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                ptr: ptr.as_ptr(),
                len,
                state: AtomicU32::new(0),
                app: Mutex::new(()),
                owned: false,
            }),
        }
    }

    /// The memory back, when this is the last handle of a buffer the library allocated
    /// (not [`Buffer::from_raw_parts`]); otherwise the buffer, unchanged. The bytes are as
    /// the buffer left them.
    pub(crate) fn into_owned(self) -> Result<Box<[u8]>, Self> {
        if !self.inner.owned {
            return Err(self);
        }
        let mut inner = Arc::try_unwrap(self.inner).map_err(|inner| Self { inner })?;
        // From here on `Inner`'s drop leaves the memory alone: the box below owns it.
        inner.owned = false;
        let slice = std::ptr::slice_from_raw_parts_mut(inner.ptr, inner.len);
        // SAFETY: `ptr`/`len` of owned memory came from `Box::into_raw` of a `Box<[u8]>` in
        // `Buffer::from_vec`; this was the last handle (`try_unwrap` succeeded, so no clone,
        // guard or NIC access can reach the memory any more), and `owned` is cleared so the
        // memory is not freed again when `inner` drops.
        Ok(unsafe { Box::from_raw(slice) })
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Self {
        Self::from_vec(data.to_vec())
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// True if the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// Virtual address of byte 0 (stable for the buffer's life).
    pub fn addr(&self) -> u64 {
        self.inner.ptr as usize as u64
    }

    /// Exclusive application access.
    ///
    /// Waits for NIC accesses already in progress (chunk-sized, so short), and for other
    /// application guards of this buffer, then holds the gate: while the guard lives, every NIC
    /// access fails. Dropping the guard reopens the gate.
    pub fn lock(&self) -> BufferGuard<'_> {
        let app = self
            .inner
            .app
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // From here on every new NIC access fails; wait for those already in progress.
        self.inner.state.fetch_or(APP, Ordering::AcqRel);
        let mut spins = 0u32;
        while self.inner.state.load(Ordering::Acquire) & (WRITER | READERS) != 0 {
            backoff(&mut spins);
        }
        BufferGuard {
            buffer: self,
            _app: app,
        }
    }

    /// Exclusive application access if it can be had at once: `None` if another application
    /// guard is held or a NIC access is in progress.
    pub fn try_lock(&self) -> Option<BufferGuard<'_>> {
        let app = match self.inner.app.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        self.inner
            .state
            .compare_exchange(0, APP, Ordering::AcqRel, Ordering::Relaxed)
            .ok()?;
        Some(BufferGuard {
            buffer: self,
            _app: app,
        })
    }

    /// A copy of the contents (takes the application gate for the copy).
    pub fn to_vec(&self) -> Vec<u8> {
        self.lock().to_vec()
    }

    /// True if `other` is this buffer (a clone of it: the same memory and access gate).
    pub(crate) fn is(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// True for memory the caller owns ([`Buffer::from_raw_parts`]): it stays valid only as
    /// long as its owner keeps it, not as long as a clone lives.
    pub(crate) fn is_foreign(&self) -> bool {
        !self.inner.owned
    }

    /// True while the application holds the buffer (a hint: may change at any moment).
    pub(crate) fn is_app_locked(&self) -> bool {
        self.inner.state.load(Ordering::Relaxed) & APP != 0
    }

    /// Checks that `offset..offset + len` lies inside the buffer; returns the range end.
    fn check_range(&self, offset: usize, len: usize) -> Result<usize, Inaccessible> {
        match offset.checked_add(len) {
            Some(end) if end <= self.inner.len => Ok(end),
            _ => Err(Inaccessible::OutOfBounds),
        }
    }

    /// Takes a NIC slot of kind `op` (a shared reader slot, or the writer bit); given back when
    /// the returned [`Release`] drops. Fails if the application holds the buffer; waits
    /// (briefly) while other NIC accesses are in the way: a writer (or every reader slot
    /// taken) for a reader, any NIC access for the writer.
    fn nic_slot(&self, op: ReleaseOp) -> Result<Release<'_>, Inaccessible> {
        let state = &self.inner.state;
        let mut spins = 0u32;
        let mut current = state.load(Ordering::Relaxed);
        loop {
            if current & APP != 0 {
                return Err(Inaccessible::Locked);
            }
            let busy = match op {
                ReleaseOp::Reader => current & WRITER != 0 || current & READERS == READERS,
                ReleaseOp::Writer => current & (WRITER | READERS) != 0,
            };
            if busy {
                backoff(&mut spins);
                current = state.load(Ordering::Relaxed);
                continue;
            }
            let taken = match op {
                ReleaseOp::Reader => current + 1,
                ReleaseOp::Writer => current | WRITER,
            };
            match state.compare_exchange_weak(current, taken, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Ok(Release { state, op }),
                Err(actual) => current = actual,
            }
        }
    }

    /// NIC read access: calls `f` with bytes `offset..offset + len` while holding a shared NIC
    /// reader slot. Fails if the range is out of bounds or the application holds the buffer;
    /// waits (briefly) only for an active NIC writer. Keep `f` short (one chunk).
    pub(crate) fn nic_read<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, Inaccessible> {
        self.check_range(offset, len)?;
        let _release = self.nic_slot(ReleaseOp::Reader)?;
        // SAFETY: the range was checked to lie inside the live allocation (`ptr` is valid for
        // `len` bytes and `offset + len <= len`). We hold a reader slot, so the gate guarantees
        // that no `&mut` to these bytes (application guard or NIC writer) exists until
        // `_release` drops, which outlives the borrow given to `f`.
        let bytes = unsafe { std::slice::from_raw_parts(self.inner.ptr.add(offset), len) };
        Ok(f(bytes))
    }

    /// NIC write access: calls `f` with bytes `offset..offset + len`, exclusively. Fails if the
    /// range is out of bounds or the application holds the buffer; waits (briefly) only for
    /// other NIC accesses in progress. Keep `f` short (one chunk).
    pub(crate) fn nic_write<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, Inaccessible> {
        self.check_range(offset, len)?;
        let _release = self.nic_slot(ReleaseOp::Writer)?;
        // SAFETY: the range lies inside the live allocation (checked above). We hold the writer
        // bit, which the gate grants only when no reader, writer or application guard is
        // active and which keeps all of them out until `_release` drops, so this is the only
        // reference to these bytes for the duration of `f`.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.inner.ptr.add(offset), len) };
        Ok(f(bytes))
    }
}

/// Which NIC slot a [`Release`] gives back.
enum ReleaseOp {
    Reader,
    Writer,
}

/// Gives a NIC slot back on drop (also on unwind out of the access closure).
struct Release<'a> {
    state: &'a AtomicU32,
    op: ReleaseOp,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        match self.op {
            ReleaseOp::Reader => self.state.fetch_sub(1, Ordering::Release),
            ReleaseOp::Writer => self.state.fetch_and(!WRITER, Ordering::Release),
        };
    }
}

/// Spin briefly, then yield, then sleep a little: waits here are for chunk-sized accesses.
fn backoff(spins: &mut u32) {
    *spins = spins.saturating_add(1);
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 1024 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

/// Exclusive application access to a [`Buffer`] (from [`Buffer::lock`]); NIC accesses fail
/// while it lives.
pub struct BufferGuard<'a> {
    buffer: &'a Buffer,
    _app: MutexGuard<'a, ()>,
}

impl fmt::Debug for BufferGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferGuard")
            .field("buffer", self.buffer)
            .finish()
    }
}

impl BufferGuard<'_> {
    /// The guarded buffer: a clone keeps its memory allocated after the guard is gone (for
    /// bindings that hand the memory to code which may hold on to it).
    pub fn buffer(&self) -> &Buffer {
        self.buffer
    }
}

impl Deref for BufferGuard<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        let inner = &self.buffer.inner;
        // SAFETY: `ptr` is valid for `len` bytes while the `Buffer` (borrowed by the guard)
        // lives. The guard holds the application mutex (so no other guard exists) and the APP
        // bit with no NIC access active (so no NIC reference exists or can be created); the
        // returned borrow is tied to `&self`, so it cannot outlive the guard.
        unsafe { std::slice::from_raw_parts(inner.ptr, inner.len) }
    }
}

impl DerefMut for BufferGuard<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        let inner = &self.buffer.inner;
        // SAFETY: as in `deref`; additionally `&mut self` guarantees that no other borrow
        // obtained through this guard is alive, so this `&mut` is unique.
        unsafe { std::slice::from_raw_parts_mut(inner.ptr, inner.len) }
    }
}

impl Drop for BufferGuard<'_> {
    fn drop(&mut self) {
        // Reopen the gate; the mutex guard (`_app`) is released right after.
        self.buffer.inner.state.fetch_and(!APP, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_handle_of_owned_memory_gives_it_back() {
        let b = Buffer::from_vec(vec![7; 4096]);
        let addr = b.addr();
        let clone = b.clone();
        let b = b.into_owned().expect_err("a clone is alive");
        drop(clone);
        let memory = b.into_owned().expect("the last handle");
        assert_eq!(memory.as_ptr() as u64, addr, "the same memory, not a copy");
        assert!(memory.iter().all(|&x| x == 7));
        // Back into a buffer and out again: still the same memory, freed once.
        let again = Buffer::from_boxed(memory);
        assert_eq!(again.addr(), addr);
        assert_eq!(again.into_owned().expect("last handle").len(), 4096);
        let mut backing = [1u8; 16];
        let ptr = std::ptr::NonNull::new(backing.as_mut_ptr()).expect("non-null");
        // SAFETY: `backing` outlives the buffer and is accessed only through it meanwhile.
        let foreign = unsafe { Buffer::from_raw_parts(ptr, backing.len()) };
        assert!(
            foreign.into_owned().is_err(),
            "the caller's memory stays theirs"
        );
    }

    #[test]
    fn try_zeroed_gives_zeroed_memory_or_none() {
        let b = Buffer::try_zeroed(3 << 20).expect("3 MiB");
        assert_eq!(b.len(), 3 << 20);
        assert!(b.lock().iter().all(|&x| x == 0));
        b.lock()[12345] = 7;
        assert_eq!(Buffer::try_zeroed(0).expect("empty").len(), 0);
        assert!(Buffer::try_zeroed(usize::MAX).is_none());
    }
    use std::sync::atomic::{AtomicBool, AtomicU64};

    #[test]
    fn constructors_and_contents() {
        let z = Buffer::zeroed(16);
        assert_eq!(z.len(), 16);
        assert!(!z.is_empty());
        assert_eq!(z.to_vec(), vec![0; 16]);
        let v = Buffer::from_vec(vec![1, 2, 3]);
        assert_eq!(v.to_vec(), vec![1, 2, 3]);
        let s = Buffer::from_slice(b"abc");
        assert_eq!(&*s.lock(), b"abc");
        let e = Buffer::zeroed(0);
        assert!(e.is_empty());
        assert_eq!(e.to_vec(), Vec::<u8>::new());
        assert_eq!(e.nic_read(0, 0, |b| b.len()), Ok(0));
        assert_eq!(e.nic_write(0, 1, |_| ()), Err(Inaccessible::OutOfBounds));
    }

    #[test]
    fn foreign_memory_is_shared_and_not_freed() {
        let mut backing = vec![1u8, 2, 3, 4];
        let ptr = std::ptr::NonNull::new(backing.as_mut_ptr()).unwrap();
        {
            // SAFETY: `backing` outlives the buffer and is not touched while it exists.
            let b = unsafe { Buffer::from_raw_parts(ptr, backing.len()) };
            assert_eq!(b.addr(), ptr.as_ptr() as usize as u64);
            assert_eq!(b.nic_write(1, 2, |s| s.copy_from_slice(&[9, 9])), Ok(()));
            assert_eq!(b.to_vec(), vec![1, 9, 9, 4]);
            let c = b.clone();
            drop(b);
            c.lock()[3] = 7;
        }
        // Dropping the buffer left the memory alone (Miri would flag a double free).
        assert_eq!(backing, vec![1, 9, 9, 7]);
    }

    #[test]
    fn addr_is_stable_and_shared_by_clones() {
        let b = Buffer::zeroed(8);
        let c = b.clone();
        assert_eq!(b.addr(), c.addr());
        b.lock()[3] = 7;
        assert_eq!(c.to_vec()[3], 7);
        let guard = c.lock();
        assert_eq!(guard.as_ptr() as usize as u64, b.addr());
    }

    #[test]
    fn nic_access_bounds() {
        let b = Buffer::zeroed(10);
        assert_eq!(b.nic_write(2, 3, |s| s.copy_from_slice(&[1, 2, 3])), Ok(()));
        assert_eq!(b.nic_read(0, 10, |s| s.to_vec()).unwrap()[2..5], [1, 2, 3]);
        assert_eq!(b.nic_read(8, 3, |_| ()), Err(Inaccessible::OutOfBounds));
        assert_eq!(b.nic_write(11, 0, |_| ()), Err(Inaccessible::OutOfBounds));
        assert_eq!(
            b.nic_write(usize::MAX, 2, |_| ()),
            Err(Inaccessible::OutOfBounds)
        );
        assert_eq!(b.nic_read(10, 0, |s| s.len()), Ok(0));
    }

    #[test]
    fn app_guard_makes_nic_fail() {
        let b = Buffer::from_slice(&[5; 4]);
        {
            let mut g = b.lock();
            assert!(b.is_app_locked());
            assert_eq!(b.nic_write(0, 4, |s| s.fill(9)), Err(Inaccessible::Locked));
            assert_eq!(b.nic_read(0, 4, |_| ()), Err(Inaccessible::Locked));
            assert!(b.try_lock().is_none());
            g[0] = 1;
        }
        assert!(!b.is_app_locked());
        assert_eq!(b.nic_read(0, 4, |s| s.to_vec()), Ok(vec![1, 5, 5, 5]));
    }

    #[test]
    fn readers_share_and_block_try_lock() {
        let b = Buffer::from_slice(&[1, 2]);
        let nested = b
            .nic_read(0, 2, |outer| {
                let inner = b.nic_read(1, 1, |s| s[0]).unwrap();
                // An application try_lock fails while a NIC access is in progress.
                let locked = b.try_lock().is_some();
                (outer[0], inner, locked)
            })
            .unwrap();
        assert_eq!(nested, (1, 2, false));
        assert!(b.try_lock().is_some());
    }

    #[test]
    fn nic_writes_vs_app_lock_from_threads() {
        const LEN: usize = 64;
        let rounds: usize = if cfg!(miri) { 20 } else { 2000 };
        let b = Buffer::zeroed(LEN);
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicU64::new(0));
        let mut nics = Vec::new();
        for t in 0..2u8 {
            let b = b.clone();
            let stop = stop.clone();
            let writes = writes.clone();
            nics.push(std::thread::spawn(move || {
                let (mut ok, mut refused) = (0u64, 0u64);
                let mut i = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    i = i.wrapping_add(1);
                    // Each NIC write fills the whole buffer with one value: if writes never
                    // overlap with the application's view, it always sees a uniform buffer.
                    match b.nic_write(0, LEN, |s| s.fill(i.wrapping_mul(2).wrapping_add(t))) {
                        Ok(()) => {
                            ok += 1;
                            writes.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Inaccessible::Locked) => refused += 1,
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                    match b.nic_read(0, LEN, |s| s.iter().all(|&x| x == s[0])) {
                        Ok(uniform) => assert!(uniform, "NIC reader saw a torn write"),
                        Err(Inaccessible::Locked) => refused += 1,
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                    std::thread::yield_now();
                }
                (ok, refused)
            }));
        }
        for round in 0..rounds {
            let mut g = b.lock();
            let first = g[0];
            assert!(
                g.iter().all(|&x| x == first),
                "application saw a torn write"
            );
            // While held, the contents must not change under us.
            g.fill(0xEE);
            std::thread::yield_now();
            assert!(g.iter().all(|&x| x == 0xEE), "NIC wrote while locked");
            drop(g);
            if round % 4 == 0 {
                std::thread::yield_now();
            }
        }
        // On a loaded machine the NIC threads may not have run yet: give them the buffer
        // (unlocked) until one write got through, or a generous bound.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while writes.load(Ordering::Relaxed) == 0 && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
        let mut total_ok = 0;
        for nic in nics {
            let (ok, _refused) = nic.join().unwrap();
            total_ok += ok;
        }
        assert!(total_ok > 0, "NIC never got access");
    }
}
