//! Kernel-timeout enforcement. Kernels run inline on their connection's worker thread (no
//! thread hand-off on the RPC path); one watchdog thread per software NAA answers an RPC whose
//! kernel overran with KERNEL_TIMEOUT while the kernel is still running.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Something the watchdog can time out: called once when its deadline passes.
pub(crate) trait Expire: Send + Sync {
    fn expire(&self);
}

struct Watch {
    id: u64,
    deadline: Instant,
    target: Weak<dyn Expire>,
}

#[derive(Default)]
struct State {
    watches: Vec<Watch>,
    next_id: u64,
    stop: bool,
}

struct Inner {
    state: Mutex<State>,
    wake: Condvar,
}

/// The watchdog thread.
pub(crate) struct Watchdog {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

/// A registered deadline; dropping it cancels the watch.
pub(crate) struct WatchGuard {
    inner: Arc<Inner>,
    id: u64,
}

/// Longest sleep between checks: new deadlines later than this never wake the thread.
const TICK: Duration = Duration::from_millis(50);

impl Watchdog {
    pub(crate) fn start() -> std::io::Result<Self> {
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let worker = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("naaice-watchdog".into())
            .spawn(move || run(&worker))?;
        Ok(Self {
            inner,
            thread: Some(thread),
        })
    }

    /// Calls `target.expire()` at `deadline` unless the guard is dropped first.
    pub(crate) fn watch(&self, deadline: Instant, target: Weak<dyn Expire>) -> WatchGuard {
        let mut s = lock(&self.inner.state);
        let id = s.next_id;
        s.next_id += 1;
        let soon = deadline <= Instant::now() + TICK;
        s.watches.push(Watch {
            id,
            deadline,
            target,
        });
        drop(s);
        if soon {
            self.inner.wake.notify_one();
        }
        WatchGuard {
            inner: Arc::clone(&self.inner),
            id,
        }
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        lock(&self.inner.state).watches.retain(|w| w.id != self.id);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        lock(&self.inner.state).stop = true;
        self.inner.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn run(inner: &Inner) {
    let mut s = lock(&inner.state);
    while !s.stop {
        let now = Instant::now();
        let mut due = Vec::new();
        s.watches.retain(|w| {
            if w.deadline <= now {
                due.push(w.target.clone());
                false
            } else {
                true
            }
        });
        let next = s.watches.iter().map(|w| w.deadline).min();
        if !due.is_empty() {
            drop(s);
            for target in due {
                if let Some(t) = target.upgrade() {
                    t.expire();
                }
            }
            s = lock(&inner.state);
            continue;
        }
        let sleep = next.map_or(TICK, |d| d.saturating_duration_since(now).min(TICK));
        s = inner
            .wake
            .wait_timeout(s, sleep)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
    }
}
