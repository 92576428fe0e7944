//! The machine-wide count of open connection ends: a System V semaphore per user, which every
//! process raises by one per connection it opens and lowers when the connection closes. The
//! kernel takes back what a process added when it exits, however it exits (`SEM_UNDO`), so a
//! crashed process leaves no stale count behind. Where System V IPC is not available (or is
//! refused), there is no census and the process counts its own connections only.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Base of the semaphore key (ASCII "NAAI"); the user id is added.
const KEY_BASE: libc::key_t = 0x4E41_4149;
/// A reading of the count is reused for this long.
const FRESH: Duration = Duration::from_millis(1);

/// The semaphore set's id, if it could be opened.
fn semaphore() -> Option<libc::c_int> {
    static ID: OnceLock<Option<libc::c_int>> = OnceLock::new();
    *ID.get_or_init(|| {
        // SAFETY: `getuid` has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let key = KEY_BASE.wrapping_add(uid as libc::key_t);
        // SAFETY: plain system call on integers; a set of one semaphore, created readable
        // and writable by this user only if it does not exist (a new set starts at 0).
        let id = unsafe { libc::semget(key, 1, libc::IPC_CREAT | 0o600) };
        if id < 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "no System V semaphore: spinning counts this process's connections only"
            );
            return None;
        }
        if !private_to(id, uid) {
            // Keys are machine-wide: another user may have made a set with this key first.
            tracing::debug!(
                key,
                "System V semaphore of another user or open to others: spinning counts this \
                 process's connections only"
            );
            return None;
        }
        Some(id)
    })
}

/// True if the semaphore set `id` was made by user `uid`, belongs to it, and only it may use
/// it (mode 0600 or narrower): nobody else can skew the count.
fn private_to(id: libc::c_int, uid: libc::uid_t) -> bool {
    // SAFETY: `semid_ds` is plain data (integers), valid all zero.
    let mut ds: libc::semid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: IPC_STAT writes one `semid_ds` through the pointer passed as the fourth
    // argument (`union semun`'s `buf`), which points to `ds` on the stack.
    let rc = unsafe { libc::semctl(id, 0, libc::IPC_STAT, &mut ds as *mut libc::semid_ds) };
    rc == 0 && ds.sem_perm.uid == uid && ds.sem_perm.cuid == uid && ds.sem_perm.mode & 0o077 == 0
}

/// Adds `delta` to the count, undone by the kernel when this process exits. False if there is
/// no census (or the change was refused).
fn adjust(delta: libc::c_short) -> bool {
    let Some(id) = semaphore() else {
        return false;
    };
    let mut op = libc::sembuf {
        sem_num: 0,
        sem_op: delta,
        sem_flg: (libc::IPC_NOWAIT | libc::SEM_UNDO) as libc::c_short,
    };
    // SAFETY: `op` is one valid `sembuf` on the stack, and the count passed is 1.
    let rc = unsafe { libc::semop(id, &mut op, 1) };
    rc == 0
}

/// Counts one more open connection end of this process (see [`leave`]).
pub(super) fn join() -> bool {
    adjust(1)
}

/// Counts one open connection end less; only for an end counted by [`join`].
pub(super) fn leave() {
    adjust(-1);
}

/// The machine's open connection ends of this user, read at most every [`FRESH`]; `None`
/// without a census.
pub(super) fn count() -> Option<usize> {
    static BASE: OnceLock<Instant> = OnceLock::new();
    static READ_AT: AtomicU64 = AtomicU64::new(u64::MAX);
    static VALUE: AtomicUsize = AtomicUsize::new(0);
    let id = semaphore()?;
    let base = *BASE.get_or_init(Instant::now);
    let now = u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let read_at = READ_AT.load(Ordering::Acquire);
    if read_at != u64::MAX && now.saturating_sub(read_at) < FRESH.as_nanos() as u64 {
        return Some(VALUE.load(Ordering::Acquire));
    }
    // SAFETY: GETVAL takes no fourth argument; the set has one semaphore, number 0.
    let value = unsafe { libc::semctl(id, 0, libc::GETVAL) };
    let value = usize::try_from(value).ok()?;
    VALUE.store(value, Ordering::Release);
    READ_AT.store(now, Ordering::Release);
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set of this user's, made with `mode`; removed when dropped.
    struct Set(libc::c_int);

    impl Set {
        fn new(mode: libc::c_int) -> Option<Self> {
            // SAFETY: plain system call on integers: a new private set of one semaphore.
            let id = unsafe { libc::semget(libc::IPC_PRIVATE, 1, libc::IPC_CREAT | mode) };
            (id >= 0).then_some(Self(id))
        }
    }

    impl Drop for Set {
        fn drop(&mut self) {
            // SAFETY: IPC_RMID on a set this test made; no fourth argument.
            unsafe { libc::semctl(self.0, 0, libc::IPC_RMID) };
        }
    }

    /// Only a set that this user made and that no one else may use is trusted with the count.
    #[test]
    fn only_a_private_set_of_this_user_is_trusted() {
        // SAFETY: `getuid` has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let (Some(private), Some(open)) = (Set::new(0o600), Set::new(0o666)) else {
            eprintln!("no System V semaphores here: nothing to check");
            return;
        };
        assert!(private_to(private.0, uid));
        assert!(!private_to(open.0, uid), "a set others may change");
        assert!(
            !private_to(private.0, uid.wrapping_add(1)),
            "another user's set"
        );
    }

    /// Joining raises the machine's count and leaving lowers it (other processes of this user
    /// may open connections meanwhile: a few tries).
    #[test]
    fn joining_and_leaving_change_the_count() {
        if semaphore().is_none() {
            eprintln!("no System V semaphores here: nothing to check");
            return;
        }
        let read = || {
            std::thread::sleep(FRESH * 2);
            count().expect("a census")
        };
        let ok = (0..5).any(|_| {
            let before = read();
            assert!(join() && join());
            let during = read();
            leave();
            leave();
            let after = read();
            during == before + 2 && after == before
        });
        assert!(ok, "the count did not follow two joins and two leaves");
    }
}
