//! What a process costs: its CPU time and its context switches (voluntary: it blocked and
//! was woken up again; involuntary: the scheduler took the core away), summed over its
//! threads. `/proc/PID/status` counts the context switches of the main thread only, so they
//! are summed over `/proc/PID/task/*/status`; threads that ended are not counted (the
//! benchmark's threads all live across a measurement).

use std::ops::{Add, Sub};
use std::time::Duration;

use crate::Error;
use crate::base::process_clock::ProcessClock;

/// CPU time and context switches of a process (totals, or the difference of two readings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// CPU time of every thread, user and system.
    pub cpu: Duration,
    /// Voluntary context switches (blocking waits: each one a wake-up).
    pub voluntary: u64,
    /// Involuntary context switches (preemptions).
    pub involuntary: u64,
}

impl Add for Usage {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self {
            cpu: self.cpu + o.cpu,
            voluntary: self.voluntary + o.voluntary,
            involuntary: self.involuntary + o.involuntary,
        }
    }
}

impl Sub for Usage {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        Self {
            cpu: self.cpu.saturating_sub(o.cpu),
            voluntary: self.voluntary.saturating_sub(o.voluntary),
            involuntary: self.involuntary.saturating_sub(o.involuntary),
        }
    }
}

impl Usage {
    /// Per RPC: (CPU seconds, voluntary, involuntary); `None` without RPCs.
    pub(crate) fn per_rpc(&self, rpcs: u64) -> Option<(f64, f64, f64)> {
        (rpcs > 0).then(|| {
            let n = rpcs as f64;
            (
                self.cpu.as_secs_f64() / n,
                self.voluntary as f64 / n,
                self.involuntary as f64 / n,
            )
        })
    }
}

/// The context-switch counts of one `/proc/…/status` text: (voluntary, involuntary).
fn switches(status: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

/// A process whose usage can be read.
#[derive(Debug)]
pub(crate) struct Process {
    clock: ProcessClock,
}

impl Process {
    /// Process `pid` (its CPU clock must be readable).
    pub(crate) fn of(pid: u32) -> Result<Self, Error> {
        Ok(Self {
            clock: ProcessClock::of(pid)?,
        })
    }

    /// This process.
    pub(crate) fn this() -> Result<Self, Error> {
        Self::of(std::process::id())
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.clock.pid()
    }

    /// Its usage so far; `None` once it has exited.
    pub(crate) fn read(&self) -> Option<Usage> {
        let cpu = self.clock.read()?;
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid())).ok()?;
        let (mut voluntary, mut involuntary) = (0, 0);
        for task in tasks.flatten() {
            // A thread may end between the listing and the read: it is skipped.
            let Ok(text) = std::fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            if let Some((v, i)) = switches(&text) {
                voluntary += v;
                involuntary += i;
            }
        }
        Some(Usage {
            cpu,
            voluntary,
            involuntary,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_status_fields() {
        let text = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(switches(text), Some((12, 3)));
        assert_eq!(switches("Name:\tx\n"), None);
    }

    /// Voluntary context switches in a `/proc/…/status` file.
    fn voluntary_in(path: &str) -> u64 {
        let text = std::fs::read_to_string(path).expect("readable");
        switches(&text).expect("switch counts").0
    }

    /// Threads that block count their wake-ups, summed over the process's threads. (Other
    /// tests' threads may end meanwhile and take their counts along, so the check compares
    /// with counts read from the threads that live through it, not with a reading before.)
    #[test]
    fn sleeping_threads_switch_voluntarily() {
        let me = Process::this().expect("this process");
        let (tx, rx) = std::sync::mpsc::channel();
        let exit = std::sync::Arc::new(std::sync::Barrier::new(3));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (tx, exit) = (tx.clone(), exit.clone());
                std::thread::spawn(move || {
                    // A sleep preempted after its timer was armed may find the timer expired
                    // and never block (an involuntary switch, not a voluntary one), so the
                    // thread sleeps until it has blocked 50 times, at most 5000 sleeps.
                    let start = voluntary_in("/proc/thread-self/status");
                    let mut now = start;
                    for _ in 0..5000 {
                        if now >= start + 50 {
                            break;
                        }
                        std::thread::sleep(Duration::from_micros(200));
                        now = voluntary_in("/proc/thread-self/status");
                    }
                    tx.send(now).expect("send");
                    // Alive while the process is read again.
                    exit.wait();
                })
            })
            .collect();
        let workers = rx.recv().expect("first") + rx.recv().expect("second");
        let main = voluntary_in(&format!("/proc/{}/status", std::process::id()));
        let all = me.read().expect("readable");
        exit.wait();
        for t in threads {
            t.join().expect("join");
        }
        assert!(
            workers >= 100,
            "two threads that slept until each blocked 50 times: {workers}"
        );
        assert!(
            all.voluntary >= main + workers,
            "{all:?}: not summed over the threads (main thread {main}, workers {workers})"
        );
        assert_eq!(all.per_rpc(0), None);
    }
}
