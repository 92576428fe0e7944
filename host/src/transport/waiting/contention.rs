//! Whether the CPUs a waiting thread runs on are shared with other busy work.
//!
//! On a busy node (one MPI rank per core, other jobs, `while :; do :; done`), a thread that
//! spins for its completion competes for its CPU with that work: the scheduler preempts it,
//! and its peer, spinning too, waits in the run queue for its turn. The exchange then crawls
//! at the scheduler's time slices (hundreds of µs to milliseconds per message), while a thread
//! that sleeps is woken ahead of busy loops and answers at once. The connections a process
//! can count ([`super::cpu_demand`]) say nothing of work that is not theirs.
//!
//! Linux keeps, per thread, the time it spent runnable but not running (`run_delay`, the
//! second field of `/proc/thread-self/schedstat`). [`Contention`] samples it once per
//! [`WINDOW`] of the waiting thread's time: a thread that waited for a CPU for at least a
//! quarter of two windows in a row, while more threads were runnable on the machine than
//! this process has CPUs (the running count of `/proc/loadavg`: others' work, not our own
//! threads sharing a CPU for a moment until the scheduler spreads them), shares its CPU with
//! other work, and the adaptive policy stops spinning for a while ([`FIRST_CALM`], doubled each
//! time contention is seen again right after, up to [`MAX_CALM`]). On an idle machine
//! nothing changes. Without schedstat (not Linux, or a kernel without `CONFIG_SCHED_INFO`)
//! nothing is ever contended.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How much of a thread's time one sample covers.
pub(crate) const WINDOW: Duration = Duration::from_millis(20);
/// A window in which the thread waited for a CPU at least 1/`SHARE` of the time (while the
/// machine was crowded) is contended; two in a row stop spinning.
const SHARE: u32 = 4;
/// How long spinning stops after contention was first seen.
pub(crate) const FIRST_CALM: Duration = Duration::from_millis(100);
/// Longest stop: contention seen again within a stop's length after it ended doubles it.
pub(crate) const MAX_CALM: Duration = Duration::from_secs(5);

/// One thread's reading: who, when, and its run delay so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reading {
    thread: u64,
    at: Instant,
    run_delay: Duration,
}

/// The contention state of one waiter (see the [module](self) documentation).
#[derive(Clone, Debug, Default)]
pub(crate) struct Contention {
    /// The start of the current window.
    start: Option<Reading>,
    /// Spinning is off until then.
    calm_until: Option<Instant>,
    /// The length of the last stop.
    calm: Duration,
    /// The last window was contended (one more in a row stops spinning).
    suspect: bool,
}

impl Contention {
    /// True while spinning is off at `now`; samples the calling thread's run delay when a
    /// window has passed.
    pub(crate) fn contended(&mut self, now: Instant) -> bool {
        let due = self
            .start
            .is_none_or(|s| now.saturating_duration_since(s.at) >= WINDOW);
        if due && let Some((thread, run_delay)) = run_delay() {
            self.observe(thread, now, run_delay, || {
                runnable().is_some_and(|n| n > super::cpus())
            });
        }
        self.calm_until.is_some_and(|t| now < t)
    }

    /// Feeds a reading of `thread`'s run delay at `now`; `crowded` tells whether more threads
    /// are runnable on the machine than this process has CPUs (asked only when the run delay
    /// is long). The whole rule, without the clock or the kernel: tests call it directly.
    pub(crate) fn observe(
        &mut self,
        thread: u64,
        now: Instant,
        run_delay: Duration,
        crowded: impl FnOnce() -> bool,
    ) {
        let reading = Reading {
            thread,
            at: now,
            run_delay,
        };
        let Some(start) = self.start.replace(reading) else {
            return;
        };
        // While spinning is off, windows are not judged: after the stop, two in a row must
        // be contended again.
        if self.calm_until.is_some_and(|t| now < t) {
            self.suspect = false;
            return;
        }
        let wall = now.saturating_duration_since(start.at);
        if start.thread != thread || wall < WINDOW || run_delay < start.run_delay {
            return;
        }
        if (run_delay - start.run_delay) * SHARE < wall || !crowded() {
            self.suspect = false;
            return;
        }
        // One such window happens on an idle machine too (a thread of ours woke on a
        // spinner's CPU); other work keeps them coming.
        if !std::mem::replace(&mut self.suspect, true) {
            return;
        }
        // Seen again within the last stop's length after it ended: a longer stop.
        let again = self
            .calm_until
            .is_some_and(|t| now < t + self.calm.max(FIRST_CALM));
        self.calm = if again {
            (self.calm * 2).clamp(FIRST_CALM, MAX_CALM)
        } else {
            FIRST_CALM
        };
        self.calm_until = Some(now + self.calm);
        self.suspect = false;
        tracing::debug!(
            waited_for_cpu = ?(run_delay - start.run_delay),
            of = ?wall,
            calm = ?self.calm,
            "waiting thread shares its CPU with other work: adaptive waits sleep at once"
        );
    }
}

/// The calling thread's id and its run delay so far, from `/proc/thread-self/schedstat`.
fn run_delay() -> Option<(u64, Duration)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some((thread_number(), Duration::from_nanos(nanos)))
}

/// Threads runnable on the machine now (the running count of `/proc/loadavg`, this one
/// included).
fn runnable() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let field = text.split_ascii_whitespace().nth(3)?;
    field.split_once('/')?.0.parse().ok()
}

/// A number of the calling thread, unique in the process.
fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NUMBER: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Feeds two [`WINDOW`]s from `at`, in each of which the thread waited `share` of the
    /// time for a CPU, after a run delay of `delay`; returns their end.
    fn window(c: &mut Contention, at: Instant, delay: Duration, share: f64) -> Instant {
        c.observe(1, at, delay, || true);
        c.observe(1, at + WINDOW, delay + WINDOW.mul_f64(share), || true);
        let delay = delay + 2 * WINDOW.mul_f64(share);
        c.observe(1, at + 2 * WINDOW, delay, || true);
        at + 2 * WINDOW
    }

    fn calm(c: &Contention, now: Instant) -> bool {
        c.calm_until.is_some_and(|t| now < t)
    }

    #[test]
    fn an_idle_machine_is_never_contended() {
        let mut c = Contention::default();
        let mut now = Instant::now();
        for i in 0..500u32 {
            now = window(&mut c, now, i * MS, 0.01);
            assert!(!calm(&c, now));
        }
    }

    #[test]
    fn waiting_for_a_cpu_stops_spinning_for_a_while_then_longer() {
        let mut c = Contention::default();
        let now = window(&mut c, Instant::now(), Duration::ZERO, 0.5);
        assert!(calm(&c, now));
        assert!(!calm(&c, now + FIRST_CALM), "the first stop is short");
        // Contended again right after the stop: twice as long, up to the longest.
        let now = window(&mut c, now + FIRST_CALM, 10 * MS, 0.5);
        assert!(calm(&c, now + FIRST_CALM));
        assert!(!calm(&c, now + 2 * FIRST_CALM));
        let mut now = now;
        for _ in 0..16 {
            let after = now + c.calm;
            now = window(&mut c, after, 20 * MS, 0.5);
        }
        assert_eq!(c.calm, MAX_CALM);
        // Long after the last stop, contention starts over with a short one.
        let now = window(&mut c, now + 10 * MAX_CALM, 30 * MS, 0.5);
        assert_eq!(c.calm, FIRST_CALM);
        assert!(calm(&c, now));
    }

    #[test]
    fn short_windows_other_threads_small_delays_and_single_windows_say_nothing() {
        let mut c = Contention::default();
        let t0 = Instant::now();
        c.observe(1, t0, Duration::ZERO, || true);
        // Half a window: too short to judge.
        c.observe(1, t0 + WINDOW / 2, 5 * MS, || true);
        assert!(!calm(&c, t0 + WINDOW / 2));
        // Another thread's reading starts a new window.
        c.observe(2, t0 + 2 * WINDOW, 100 * MS, || true);
        assert!(!calm(&c, t0 + 2 * WINDOW));
        // Under a quarter of the window: not contended.
        let mut delay = 100 * MS + WINDOW / 5;
        c.observe(2, t0 + 3 * WINDOW, delay, || true);
        assert!(!calm(&c, t0 + 3 * WINDOW));
        // One contended window, then a quiet one: nothing.
        delay += WINDOW / 2;
        c.observe(2, t0 + 4 * WINDOW, delay, || true);
        assert!(!calm(&c, t0 + 4 * WINDOW), "one window alone");
        c.observe(2, t0 + 5 * WINDOW, delay, || true);
        delay += WINDOW / 2;
        c.observe(2, t0 + 6 * WINDOW, delay, || true);
        assert!(!calm(&c, t0 + 6 * WINDOW), "not in a row");
        // Two in a row: contended.
        delay += WINDOW / 2;
        c.observe(2, t0 + 7 * WINDOW, delay, || true);
        assert!(calm(&c, t0 + 7 * WINDOW));
    }

    #[test]
    fn our_own_threads_sharing_a_cpu_are_not_contention() {
        // Long run delays, but no more threads runnable than CPUs: the scheduler spreads our
        // threads in a moment (sleeping would keep them together: a woken thread starts on
        // its waker's CPU).
        let mut c = Contention::default();
        let t0 = Instant::now();
        c.observe(1, t0, Duration::ZERO, || false);
        c.observe(1, t0 + WINDOW, WINDOW / 2, || false);
        c.observe(1, t0 + 2 * WINDOW, WINDOW, || false);
        assert!(!calm(&c, t0 + 2 * WINDOW));
        c.observe(1, t0 + 3 * WINDOW, 3 * WINDOW / 2, || true);
        c.observe(1, t0 + 4 * WINDOW, 2 * WINDOW, || true);
        assert!(calm(&c, t0 + 4 * WINDOW), "others' work: contended");
    }

    #[test]
    fn this_thread_has_a_run_delay_where_linux_keeps_one() {
        if std::path::Path::new("/proc/thread-self/schedstat").exists() {
            let (thread, _) = run_delay().expect("schedstat parses");
            assert!(thread > 0);
        }
        if std::path::Path::new("/proc/loadavg").exists() {
            assert!(runnable().expect("loadavg parses") >= 1, "this thread runs");
        }
    }
}
