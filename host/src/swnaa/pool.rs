//! The worker threads of a software NAA, kept for the next connection.
//!
//! A connection's worker answers the connection request (spec §1.3), so the time a worker
//! takes to start is part of every client's connect. Starting a thread costs its creation,
//! its stack and its first run on another CPU (50–120 µs measured on a 2-vCPU VM); waking a
//! parked one costs the wake-up (about 14 µs there). So a worker whose connection ended
//! parks and serves the next connection, up to [`Pool::new`]'s `keep` parked threads; one is
//! started with the pool, so that a freshly started NAA's first client meets a started
//! worker too. The most recently parked worker goes first (its stack and memory are the
//! warmest). A worker parked for [`PARK_LIMIT`] ends unless it is the last one parked: an NAA
//! that served a burst of connections does not keep their threads.
//!
//! A task that panics ends its thread (its [`Task`] counts as finished all the same); the
//! pool starts another when it needs one.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a worker stays parked before it ends (unless it is the last one parked).
pub(crate) const PARK_LIMIT: Duration = Duration::from_secs(30);

/// Work for a worker thread.
type Work = Box<dyn FnOnce() + Send>;

/// What a parked worker is handed: the work, and the sender that parks it again.
struct Job {
    work: Work,
    park: Sender<Self>,
}

/// The parked workers (each with its number), and whether the pool still takes them back.
#[derive(Default)]
struct Parked {
    senders: Vec<(u64, Sender<Job>)>,
    closed: bool,
    next_number: u64,
}

/// Worker threads for a software NAA's connections (master thread only; see the
/// [module](self) documentation).
pub(crate) struct Pool {
    name: &'static str,
    keep: usize,
    parked: Arc<Mutex<Parked>>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("keep", &self.keep)
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

/// A task handed to the pool: whether it has ended.
#[derive(Debug, Clone)]
pub(crate) struct Task {
    done: Arc<AtomicBool>,
}

impl Task {
    /// True once the task returned (or panicked).
    pub(crate) fn is_finished(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

/// Marks its task finished when dropped: after it returned, or while a panic unwinds.
struct Finish(Arc<AtomicBool>);

impl Drop for Finish {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl Pool {
    /// A pool of threads named `name` that keeps at most `keep` of them parked, one started
    /// at once (none when `keep` is 0). Fails if that thread cannot be started.
    pub(crate) fn new(name: &'static str, keep: usize) -> io::Result<Self> {
        let mut pool = Self {
            name,
            keep,
            parked: Arc::default(),
            threads: Vec::new(),
        };
        if keep > 0 {
            // It parks itself: a task that comes before it has parked gets a thread of its own.
            let (park, jobs) = mpsc::channel();
            pool.start(None, park, jobs)?;
        }
        Ok(pool)
    }

    /// Runs `work` on a parked worker, or on a new thread when none is parked.
    pub(crate) fn run(&mut self, work: impl FnOnce() + Send + 'static) -> io::Result<Task> {
        self.join_finished();
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let mut work: Work = Box::new(move || {
            let _finish = Finish(flag);
            work();
        });
        // A send fails only if the receiving thread is gone, which a parked one is not (a
        // worker leaves the list, under its lock, before it ends); should it happen, the work
        // comes back and goes to the next parked worker, or to a new thread.
        while let Some((_, park)) = self.lock().senders.pop() {
            match park.send(Job {
                work,
                park: park.clone(),
            }) {
                Ok(()) => return Ok(Task { done }),
                Err(mpsc::SendError(job)) => work = job.work,
            }
        }
        let (park, jobs) = mpsc::channel();
        self.start(Some(work), park, jobs)?;
        Ok(Task { done })
    }

    fn start(
        &mut self,
        first: Option<Work>,
        park: Sender<Job>,
        jobs: Receiver<Job>,
    ) -> io::Result<()> {
        let parked = Arc::clone(&self.parked);
        let keep = self.keep;
        let number = {
            let mut p = self.lock();
            p.next_number += 1;
            p.next_number
        };
        let thread = std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || {
                let worker = Worker {
                    number,
                    jobs,
                    parked: &parked,
                    keep,
                    limit: PARK_LIMIT,
                };
                worker.serve(first, park);
            })?;
        self.threads.push(thread);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.parked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the threads that have ended (their work returned: the join only waits for the
    /// thread's exit). Not detached: a thread of the pool is always joined, so that once
    /// [`Pool::join_all`] returns none is left.
    fn join_finished(&mut self) {
        let (ended, running): (Vec<_>, Vec<_>) = std::mem::take(&mut self.threads)
            .into_iter()
            .partition(JoinHandle::is_finished);
        self.threads = running;
        for t in ended {
            let _ = t.join();
        }
    }

    /// Stops taking workers back, lets the parked ones end and waits for every thread (the
    /// running tasks' included).
    pub(crate) fn join_all(self) {
        {
            let mut parked = self.lock();
            parked.closed = true;
            parked.senders.clear();
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// A worker thread of a pool.
struct Worker<'a> {
    number: u64,
    jobs: Receiver<Job>,
    parked: &'a Mutex<Parked>,
    keep: usize,
    limit: Duration,
}

impl Worker<'_> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.parked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `first`, then whatever it is handed while it is parked, until the pool closes,
    /// already keeps `keep` parked workers, or it was parked for `limit` while another worker
    /// was parked too.
    fn serve(&self, first: Option<Work>, park: Sender<Job>) {
        let mut next = first;
        let mut park = Some(park);
        loop {
            if let Some(work) = next.take() {
                work();
            }
            {
                let mut p = self.lock();
                if p.closed || p.senders.len() >= self.keep {
                    return;
                }
                if let Some(s) = park.take() {
                    p.senders.push((self.number, s));
                }
            }
            // Only the parked list holds this thread's sender now: closing the pool drops it,
            // which ends the wait.
            match self.jobs.recv_timeout(self.limit) {
                Ok(job) => {
                    park = Some(job.park);
                    next = Some(job.work);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let mut p = self.lock();
                    let mine = p.senders.iter().position(|(n, _)| *n == self.number);
                    match mine {
                        // Taken meanwhile: its job is on the way.
                        None => {}
                        Some(i) if p.senders.len() > 1 => {
                            p.senders.remove(i);
                            return;
                        }
                        // The last one parked stays.
                        Some(_) => {}
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::time::{Duration, Instant};

    fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn thread_id(pool: &mut Pool) -> std::thread::ThreadId {
        let (tx, rx) = mpsc::channel();
        let task = pool
            .run(move || tx.send(std::thread::current().id()).unwrap())
            .unwrap();
        let id = rx.recv().unwrap();
        wait_until("the task ended", || task.is_finished());
        id
    }

    #[test]
    fn a_parked_worker_serves_the_next_task() {
        let mut pool = Pool::new("pool-test", 2).unwrap();
        wait_until("the first worker parked", || pool.lock().senders.len() == 1);
        let first = thread_id(&mut pool);
        // The worker parks after its task's flag is set: wait until it is back.
        wait_until("the worker parked", || pool.lock().senders.len() == 1);
        assert_eq!(thread_id(&mut pool), first, "the same thread again");
        assert_eq!(pool.threads.len(), 1, "one thread, started with the pool");
        pool.join_all();
    }

    #[test]
    fn busy_workers_make_new_threads_and_at_most_keep_park() {
        let mut pool = Pool::new("pool-test", 2).unwrap();
        wait_until("the first worker parked", || pool.lock().senders.len() == 1);
        let barrier = Arc::new(Barrier::new(5));
        let tasks: Vec<Task> = (0..4)
            .map(|_| {
                let b = Arc::clone(&barrier);
                pool.run(move || {
                    b.wait();
                })
                .unwrap()
            })
            .collect();
        // All four run at once: four threads.
        barrier.wait();
        wait_until("every task ended", || tasks.iter().all(Task::is_finished));
        wait_until("two parked, two ended", || {
            pool.lock().senders.len() == 2
                && pool.threads.iter().filter(|t| t.is_finished()).count() == 2
        });
        assert_eq!(pool.threads.len(), 4);
        pool.join_all();
    }

    #[test]
    fn a_panicking_task_counts_as_finished_and_the_pool_goes_on() {
        let mut pool = Pool::new("pool-test", 1).unwrap();
        let task = pool
            .run(|| panic!("a task that panics (expected)"))
            .unwrap();
        wait_until("the task ended", || task.is_finished());
        let (tx, rx) = mpsc::channel();
        let next = pool.run(move || tx.send(7).unwrap()).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(7));
        wait_until("the next task ended", || next.is_finished());
        pool.join_all();
    }

    #[test]
    fn join_all_waits_for_running_tasks_and_ends_parked_workers() {
        let mut pool = Pool::new("pool-test", 4).unwrap();
        let (tx, rx) = mpsc::channel::<()>();
        let ended = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ended);
        pool.run(move || {
            let _ = rx.recv_timeout(Duration::from_millis(200));
            flag.store(true, Ordering::Release);
        })
        .unwrap();
        drop(tx);
        pool.join_all();
        assert!(
            ended.load(Ordering::Acquire),
            "join_all returned before the task"
        );
    }

    #[test]
    fn a_worker_parked_past_the_limit_ends_unless_it_is_the_last() {
        let parked = Arc::new(Mutex::new(Parked::default()));
        let start = |number: u64| {
            let (park, jobs) = mpsc::channel();
            let parked = Arc::clone(&parked);
            std::thread::spawn(move || {
                let w = Worker {
                    number,
                    jobs,
                    parked: &parked,
                    keep: 4,
                    limit: Duration::from_millis(20),
                };
                w.serve(None, park);
            })
        };
        let (a, b) = (start(1), start(2));
        // One of the two ends after the limit; the other stays parked.
        wait_until("one worker ended", || a.is_finished() || b.is_finished());
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !(a.is_finished() && b.is_finished()),
            "the last one parked stays"
        );
        assert_eq!(parked.lock().unwrap().senders.len(), 1);
        // Closing ends the last one too.
        {
            let mut p = parked.lock().unwrap();
            p.closed = true;
            p.senders.clear();
        }
        wait_until("both ended", || a.is_finished() && b.is_finished());
    }

    #[test]
    fn keep_zero_starts_a_thread_per_task() {
        let mut pool = Pool::new("pool-test", 0).unwrap();
        assert!(pool.threads.is_empty(), "nothing started with the pool");
        let a = thread_id(&mut pool);
        let b = thread_id(&mut pool);
        assert_ne!(a, b);
        pool.join_all();
    }
}
