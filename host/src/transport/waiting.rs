//! How a connection waits for its completions: spin (poll the completion queue in a loop) for
//! a while, then arm the completion channel and sleep.
//!
//! Spinning finds a completion microseconds earlier than a wake-up from sleep does (a
//! wake-up costs several µs on hardware and tens to hundreds under emulation), but burns a core
//! while it lasts. The [`WaitPolicy`] says which trade a connection makes:
//!
//! * [`WaitPolicy::Adaptive`] (the default) spins for a budget learned from the connection's
//!   recent waits, bounded by a cap, and backs off to sleeping at once when spinning does not
//!   pay (a learner per connection, in its driver);
//! * [`WaitPolicy::Poll`] never sleeps (a dedicated core per connection, as the C software NAA
//!   effectively has);
//! * [`WaitPolicy::Sleep`] sleeps at once; [`WaitPolicy::Spin`] spins for a fixed time.
//!
//! Spinning only uses idle cores. The adaptive policy spins only while every thread that the
//! process's open connections keep busy, theirs and their peers' on this machine, and every
//! other task of its job on this node has a CPU of its own ([`cpu_demand`],
//! [`OpenConnection`], [`launcher_local_tasks`]), and while the waiting thread does not have
//! to wait for its CPU (other busy work on the node: `contention`). Otherwise it sleeps at
//! once, instead of taking the CPU from the threads that produce the completions: a spinning
//! thread that the scheduler preempts, and a peer that spins in the run queue, turn a round
//! trip of microseconds into one of scheduler time slices. Fixed spinning
//! ([`WaitPolicy::Spin`]) spins on at most one thread per CPU of the process.
//!
//! The policy belongs to a connection: in Rust [`NaaOptions::wait`](crate::NaaOptions) for a
//! handle, [`Connection::set_wait`](crate::Connection::set_wait) for an AP1 connection and
//! [`SoftNaaConfig::wait`](crate::swnaa::SoftNaaConfig) for a software NAA's workers; in C and
//! Python `NAAICE_WAIT` ([`crate::discovery::environment`]); on the `naaice-swnaa` command
//! line `--wait`. The connection's driver decides each wait by it (a learner per connection);
//! the software transport carries a spin out by reading its socket without blocking, the verbs
//! transport by polling its completion queue.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

mod contention;
mod cores;

use contention::Contention;
pub(crate) use cores::SpinSlot;
pub use cores::{
    LAUNCHER_LOCAL_TASKS_VARS, OpenConnection, cores_to_spare, cpu_demand, cpus,
    launcher_local_tasks,
};

/// Default cap of the adaptive spin budget.
pub const DEFAULT_SPIN_CAP: Duration = Duration::from_micros(200);
/// Largest cap (and fixed spin) accepted from text: one second.
const MAX_SPIN_TEXT: Duration = Duration::from_secs(1);
/// Smallest non-zero adaptive budget; a budget halved below it becomes zero (sleep at once).
const FLOOR: Duration = Duration::from_micros(5);
/// While spinning does not pay, every this many waits spin once anyway, to notice when waits
/// become short again.
const PROBE_EVERY: u32 = 16;
/// Waits in a row on which spinning did not pay before the budget shrinks.
const FUTILE_IN_A_ROW: u32 = 4;
/// Weight of a new sample in the moving average: 1/2^`EWMA_SHIFT`.
const EWMA_SHIFT: u32 = 3;
/// A wait that ended while spinning is recent within this many waits.
const RECENT_HITS: u32 = 64;
/// The first waits of a connection (its setup: the MRSP exchange and the first RPC) spin up
/// to this many times the cap.
const SETUP_FACTOR: u32 = 8;
/// How many waits of a new connection are setup waits.
const SETUP_WAITS: u32 = 4;
/// The wake-up estimate rises by at most 1/2^`WAKE_RISE_SHIFT` of itself per sleep.
const WAKE_RISE_SHIFT: u32 = 4;
/// Sleeps longer than this many times the cap say nothing about the wake-up cost (the
/// completion simply came late) and do not feed its estimate.
const WAKE_SAMPLE_CAPS: u32 = 2;

/// `average + (sample - average) / 8`, in nanoseconds (waits are far below 2^64 ns).
fn ewma(average: Duration, sample: Duration) -> Duration {
    let a = average.as_nanos() as i128;
    let next = a + ((sample.as_nanos() as i128 - a) >> EWMA_SHIFT);
    Duration::from_nanos(u64::try_from(next.max(0)).unwrap_or(u64::MAX))
}

/// How a connection waits for completions (see the [module](self) documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Spin for about twice the recent typical wait, at most `cap`, then sleep; spin not at
    /// all while waits are longer than `cap`.
    Adaptive {
        /// Longest spin of one wait.
        cap: Duration,
    },
    /// Never sleep: spin until something is ready or the deadline passes.
    Poll,
    /// Sleep at once.
    Sleep,
    /// Spin for this long, then sleep.
    Spin(Duration),
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self::Adaptive {
            cap: DEFAULT_SPIN_CAP,
        }
    }
}

/// Why a wait-policy text could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a wait policy (use adaptive, adaptive:CAP_US, poll, sleep or spin:US, \
     with at most 1000000 µs)"
)]
pub struct ParseWaitPolicyError(String);

impl FromStr for WaitPolicy {
    type Err = ParseWaitPolicyError;

    /// `adaptive`, `adaptive:CAP_US`, `poll`, `sleep` or `spin:US` (any case; times in µs,
    /// at most one second).
    fn from_str(s: &str) -> Result<Self, ParseWaitPolicyError> {
        let text = s.trim().to_ascii_lowercase();
        let error = || ParseWaitPolicyError(s.to_owned());
        let (name, arg) = match text.split_once(':') {
            Some((name, arg)) => (name.trim(), Some(arg.trim())),
            None => (text.as_str(), None),
        };
        let micros = |arg: &str| -> Result<Duration, ParseWaitPolicyError> {
            arg.parse::<u64>()
                .ok()
                .map(Duration::from_micros)
                .filter(|d| *d <= MAX_SPIN_TEXT)
                .ok_or_else(error)
        };
        match (name, arg) {
            ("adaptive", None) => Ok(Self::default()),
            ("adaptive", Some(cap)) => Ok(Self::Adaptive { cap: micros(cap)? }),
            ("poll", None) => Ok(Self::Poll),
            ("sleep", None) => Ok(Self::Sleep),
            ("spin", Some(us)) => Ok(Self::Spin(micros(us)?)),
            _ => Err(error()),
        }
    }
}

impl fmt::Display for WaitPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Adaptive { cap } if *cap == DEFAULT_SPIN_CAP => f.write_str("adaptive"),
            Self::Adaptive { cap } => write!(f, "adaptive:{}", cap.as_micros()),
            Self::Poll => f.write_str("poll"),
            Self::Sleep => f.write_str("sleep"),
            Self::Spin(d) => write!(f, "spin:{}", d.as_micros()),
        }
    }
}

/// How one wait ended, as the transport saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitEnd {
    /// Something was ready after spinning this long.
    Spun(Duration),
    /// Something was ready after spinning the whole budget and sleeping: this long in all,
    /// the wake-up included.
    Slept(Duration),
    /// The deadline passed after this long, with nothing ready.
    TimedOut(Duration),
}

/// How an endpoint's wait ended ([`Endpoint::wait`](crate::transport::Endpoint::wait)), as
/// the transport saw it; the connection's waiting learner takes it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// A completion was ready after spinning this long (or right after arming the sleep:
    /// no wake-up was paid).
    Spun(Duration),
    /// A completion was ready after sleeping; the wait lasted this long in all.
    Slept(Duration),
    /// Something was ready that teaches nothing about how long completions take (a
    /// connection event, or a completion already there when the wait began).
    Other,
    /// The deadline passed, or the endpoint's waker ended the wait, after this long.
    TimedOut(Duration),
}

impl Woken {
    /// True if something is ready.
    pub fn ready(self) -> bool {
        !matches!(self, Self::TimedOut(_))
    }
}

/// How one wait spins (see [`Waiter::plan`]).
#[derive(Debug)]
pub(crate) struct SpinPlan {
    /// How long it spins before it sleeps; `None`: until its deadline (never sleep).
    pub(crate) budget: Option<Duration>,
    /// Held for the wait (given back when the plan is dropped, as the wait returns).
    #[allow(dead_code, reason = "held for its Drop; read only by tests")]
    pub(crate) slot: Option<SpinSlot>,
}

impl SpinPlan {
    /// When a wait that started at `start` stops spinning (`deadline` at the latest).
    pub(crate) fn spin_until(&self, start: Instant, deadline: Instant) -> Instant {
        self.budget
            .and_then(|b| start.checked_add(b))
            .map_or(deadline, |t| t.min(deadline))
    }
}

/// The waiting state of one connection: how long its next wait spins, learned from how its
/// recent waits ended.
///
/// The adaptive rule, with `cap` the policy's bound:
/// * `wake` estimates what a sleep costs beyond the wait itself (arming, the wake-up, the
///   scheduler): a low quantile of how long recent sleeps lasted. It follows a shorter
///   sleep at once and rises by at most 1/16 per sleep; sleeps longer than `2·cap` do not
///   count (their completion came late);
/// * `typical` is a moving average (weight 1/8) of how long waits took until something was
///   ready, each sample capped at `cap` (a wait that slept counts without `wake`);
/// * a wait that found something while spinning sets the budget to the larger of
///   `2·typical` and `wake`, within [5 µs, `cap`]: spinning as long as a sleep would cost is
///   the classic spin-then-block rule (never more than twice the best choice made in
///   hindsight), and under emulation, where a wake-up costs 150–250 µs, `2·typical` alone
///   left every wait in the slow tail asleep (measured on Soft-RoCE: 12–16 % of the waits of a
///   64-byte ping-pong slept, each paying about 200 µs);
/// * a wait that slept but would have ended within `cap` (its length less `wake`) shows that
///   spinning longer would have paid: the budget grows to the larger of `2·typical`, `wake`
///   and twice itself, within [5 µs, `cap`];
/// * a wait that slept (or timed out) after more than `cap` shows that spinning did not pay:
///   from the fourth such wait in a row, the budget halves, and becomes zero (sleep at once)
///   below 5 µs (a few long waits, such as the memory-region setup before the first RPC or a
///   peer that was descheduled, do not make the next short one sleep); but while one of the
///   last 64 waits ended while spinning, it stays at least twice the moving average of such
///   waits (in a ping-pong, a side that sleeps makes the other's waits long: if both then
///   stopped spinning, both would pay a wake-up on every wait from then on);
/// * while the budget is zero, every 16th wait spins `2·typical` (within [5 µs, `cap`]) to
///   notice when waits become short again.
///
/// A new connection starts with `typical = cap/2` (the budget is `cap`: optimistic until its
/// waits are known), and its first 4 waits spin up to `8·cap` (1.6 ms by default): during
/// setup each side waits while the other registers memory, which takes longer than `cap`
/// under emulation, and a wake-up there costs more than the whole exchange otherwise would
/// (measured on Soft-RoCE: the NAA fell asleep just before the MRSP request arrived and
/// took 150–180 µs to wake, of an MRSP of about 420 µs). After that a wait spins at most
/// `cap`, and while waits are long the spinning costs at most `cap`/16 per wait after a few
/// waits.
#[derive(Clone, Debug)]
pub(crate) struct Waiter {
    policy: WaitPolicy,
    typical: Duration,
    budget: Duration,
    waits_since_probe: u32,
    /// Waits in a row on which spinning did not pay.
    futile: u32,
    /// Moving average of the waits that ended while spinning.
    hit: Duration,
    /// Waits since the last one that ended while spinning.
    since_hit: u32,
    /// Setup waits left (see [`SETUP_WAITS`]).
    setup_left: u32,
    /// Estimated cost of a sleep beyond the wait (zero until a wait slept).
    wake: Duration,
    /// How long the current wait spins before it sleeps (the last budget handed out).
    spinning: Duration,
    /// Whether the waiting thread shares its CPU with other busy work.
    contention: Contention,
}

impl Waiter {
    /// A new connection's state under `policy`.
    pub(crate) fn new(policy: WaitPolicy) -> Self {
        let typical = match policy {
            WaitPolicy::Adaptive { cap } => cap / 2,
            _ => Duration::ZERO,
        };
        let mut waiter = Self {
            policy,
            typical,
            budget: Duration::ZERO,
            waits_since_probe: 0,
            futile: 0,
            hit: Duration::ZERO,
            since_hit: RECENT_HITS,
            setup_left: SETUP_WAITS,
            wake: Duration::ZERO,
            spinning: Duration::ZERO,
            contention: Contention::default(),
        };
        waiter.budget = waiter.learned();
        waiter
    }

    /// How long the next wait spins before it sleeps; `None`: until its deadline (never
    /// sleep).
    pub(crate) fn spin_budget(&mut self) -> Option<Duration> {
        let budget = self.next_budget();
        self.spinning = budget.unwrap_or(Duration::ZERO);
        budget
    }

    /// Plans the next wait, which starts at `now`: the policy's spin budget, and the
    /// [`SpinSlot`] it holds while it spins. Under the adaptive policy it sleeps at once
    /// instead while the process's connections keep more threads busy than there are CPUs
    /// ([`cores_to_spare`]) or while the waiting thread shares its CPU with other busy work
    /// (it waited for a CPU: see `contention`); under any spinning policy when every slot is
    /// taken.
    pub(crate) fn plan(&mut self, now: Instant) -> SpinPlan {
        let budget = self.spin_budget();
        let adaptive = matches!(self.policy, WaitPolicy::Adaptive { .. });
        let busy = |w: &mut Self| adaptive && (!cores_to_spare() || w.contention.contended(now));
        self.plan_given(budget, busy, SpinSlot::take)
    }

    /// [`Waiter::plan`] with `busy` saying whether the CPUs are taken and `slot` taking a
    /// spin slot (tests inject both).
    fn plan_given(
        &mut self,
        budget: Option<Duration>,
        busy: impl FnOnce(&mut Self) -> bool,
        slot: impl FnOnce() -> Option<SpinSlot>,
    ) -> SpinPlan {
        let sleep = SpinPlan {
            budget: Some(Duration::ZERO),
            slot: None,
        };
        match budget {
            None => SpinPlan { budget, slot: None },
            Some(b) if b.is_zero() => sleep,
            Some(_) if busy(self) => {
                self.spin_denied();
                sleep
            }
            Some(_) => match slot() {
                Some(slot) => SpinPlan {
                    budget,
                    slot: Some(slot),
                },
                None => {
                    self.spin_denied();
                    sleep
                }
            },
        }
    }

    /// The next wait sleeps at once after all (no [`SpinSlot`] was free): it is learned from
    /// as a wait that did not spin.
    pub(crate) fn spin_denied(&mut self) {
        self.spinning = Duration::ZERO;
    }

    fn next_budget(&mut self) -> Option<Duration> {
        match self.policy {
            WaitPolicy::Poll => None,
            WaitPolicy::Sleep => Some(Duration::ZERO),
            WaitPolicy::Spin(d) => Some(d),
            WaitPolicy::Adaptive { cap } if self.setup_left > 0 => {
                self.setup_left -= 1;
                Some(cap.saturating_mul(SETUP_FACTOR))
            }
            WaitPolicy::Adaptive { .. } if self.budget.is_zero() => {
                self.waits_since_probe += 1;
                if self.waits_since_probe >= PROBE_EVERY {
                    self.waits_since_probe = 0;
                    Some(self.learned())
                } else {
                    Some(Duration::ZERO)
                }
            }
            WaitPolicy::Adaptive { .. } => Some(self.budget),
        }
    }

    /// Learns from how an endpoint's wait ended ([`Woken`]; [`Woken::Other`] teaches
    /// nothing).
    pub(crate) fn learn(&mut self, woken: Woken) {
        match woken {
            Woken::Spun(t) => self.record(WaitEnd::Spun(t)),
            Woken::Slept(t) => self.record(WaitEnd::Slept(t)),
            Woken::TimedOut(t) => self.record(WaitEnd::TimedOut(t)),
            Woken::Other => {}
        }
    }

    /// Learns from how the last wait ended (only the adaptive policy learns).
    pub(crate) fn record(&mut self, end: WaitEnd) {
        let WaitPolicy::Adaptive { cap } = self.policy else {
            return;
        };
        match end {
            WaitEnd::Spun(t) => {
                self.futile = 0;
                self.since_hit = 0;
                self.hit = ewma(self.hit, t.min(cap));
                self.observe(t.min(cap));
                self.budget = self.learned().max(self.clamped(self.wake));
            }
            WaitEnd::Slept(t) => {
                self.learn_wake(t.saturating_sub(self.spinning), cap);
                let waited = t.saturating_sub(self.wake);
                if waited > cap {
                    self.since_hit = self.since_hit.saturating_add(1);
                    self.observe(cap);
                    self.back_off();
                    return;
                }
                self.futile = 0;
                self.since_hit = self.since_hit.saturating_add(1);
                self.observe(waited);
                self.budget = self
                    .learned()
                    .max(self.clamped(self.budget.saturating_mul(2)))
                    .max(self.clamped(self.wake));
            }
            WaitEnd::TimedOut(t) if t > cap => {
                self.since_hit = self.since_hit.saturating_add(1);
                self.back_off();
            }
            // A short timeout (a protocol deadline) says nothing about completions.
            WaitEnd::TimedOut(_) => {}
        }
    }

    /// Feeds how long a sleep lasted (the wait's length less its spinning) to the wake-up
    /// estimate.
    fn learn_wake(&mut self, asleep: Duration, cap: Duration) {
        if asleep > cap.saturating_mul(WAKE_SAMPLE_CAPS) {
            return;
        }
        let risen = self.wake.saturating_add(self.wake / (1 << WAKE_RISE_SHIFT));
        self.wake = if self.wake.is_zero() {
            asleep
        } else {
            asleep.min(risen)
        };
    }

    fn observe(&mut self, sample: Duration) {
        self.typical = ewma(self.typical, sample);
    }

    fn back_off(&mut self) {
        self.futile = self.futile.saturating_add(1);
        if self.futile < FUTILE_IN_A_ROW {
            return;
        }
        let half = self.budget / 2;
        let half = if half < FLOOR { Duration::ZERO } else { half };
        // While waits still end in spinning now and then, keep spinning as long as those
        // take: a peer that slept makes waits long, and sleeping in turn would keep it so.
        let floor = if self.since_hit < RECENT_HITS {
            self.clamped(self.hit.saturating_mul(2))
        } else {
            Duration::ZERO
        };
        self.budget = half.max(floor);
    }

    /// `2·typical` within [FLOOR, cap].
    fn learned(&self) -> Duration {
        self.clamped(self.typical.saturating_mul(2))
    }

    fn clamped(&self, d: Duration) -> Duration {
        match self.policy {
            WaitPolicy::Adaptive { cap } => d.max(FLOOR).min(cap),
            _ => d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    fn adaptive() -> Waiter {
        after_setup(WaitPolicy::default())
    }

    fn budget(w: &mut Waiter) -> Duration {
        w.spin_budget().expect("adaptive waits have a budget")
    }

    /// An adaptive waiter that saw 64 waits end while spinning, each after `typical`.
    fn used_to(typical: Duration) -> Waiter {
        let mut w = adaptive();
        for _ in 0..64 {
            w.record(WaitEnd::Spun(typical));
        }
        w
    }

    #[test]
    fn short_waits_are_spun_for_about_twice_their_length() {
        let mut w = adaptive();
        assert_eq!(budget(&mut w), DEFAULT_SPIN_CAP, "optimistic at first");
        for _ in 0..64 {
            w.record(WaitEnd::Spun(30 * US));
        }
        let b = budget(&mut w);
        assert!(b >= 59 * US && b <= 61 * US, "{b:?}");
        // Shorter waits shrink the budget, never below the floor.
        for _ in 0..128 {
            w.record(WaitEnd::Spun(Duration::ZERO));
        }
        assert_eq!(budget(&mut w), FLOOR);
    }

    /// A new connection's waiter after its setup waits.
    fn after_setup(policy: WaitPolicy) -> Waiter {
        let mut w = Waiter::new(policy);
        for _ in 0..SETUP_WAITS {
            w.spin_budget();
        }
        w
    }

    #[test]
    fn setup_waits_spin_longer_then_the_cap_holds() {
        let cap = 100 * US;
        let mut w = Waiter::new(WaitPolicy::Adaptive { cap });
        for _ in 0..SETUP_WAITS {
            assert_eq!(budget(&mut w), 8 * cap);
            // A setup wait that took long (the peer registered memory) teaches what any
            // wait of that length does.
            w.record(WaitEnd::Spun(700 * US));
        }
        assert_eq!(budget(&mut w), cap);
        // Only a new connection has setup waits.
        for _ in 0..64 {
            w.record(WaitEnd::Slept(10_000 * US));
        }
        for _ in 0..8 {
            assert!(budget(&mut w) <= cap);
        }
        assert_eq!(Waiter::new(WaitPolicy::Poll).spin_budget(), None);
        assert_eq!(
            Waiter::new(WaitPolicy::Spin(7 * US)).spin_budget(),
            Some(7 * US),
            "fixed policies have no setup waits"
        );
    }

    #[test]
    fn the_budget_never_exceeds_the_cap() {
        let cap = 100 * US;
        let mut w = after_setup(WaitPolicy::Adaptive { cap });
        for _ in 0..64 {
            w.record(WaitEnd::Spun(90 * US));
            assert!(budget(&mut w) <= cap);
        }
        assert_eq!(budget(&mut w), cap);
        for _ in 0..64 {
            w.record(WaitEnd::Slept(95 * US));
            assert!(budget(&mut w) <= cap);
        }
    }

    #[test]
    fn a_sleep_that_ended_within_the_cap_grows_the_budget_to_what_it_cost() {
        let mut w = used_to(10 * US);
        let small = budget(&mut w);
        assert!(small >= 20 * US && small <= 21 * US, "{small:?}");
        // A wait sleeps after its 20 µs of spinning and is over 120 µs after it began: the
        // sleep cost 100 µs, so spinning that long pays from now on.
        w.record(WaitEnd::Slept(small + 100 * US));
        let b = budget(&mut w);
        assert!(b >= 99 * US && b <= 101 * US, "{b:?}");
        // Short waits found while spinning keep it (a hit says nothing about sleeping).
        for _ in 0..64 {
            w.record(WaitEnd::Spun(10 * US));
        }
        let b = budget(&mut w);
        assert!(b >= 99 * US && b <= 101 * US, "{b:?}");
    }

    #[test]
    fn a_cheap_wake_up_keeps_the_budget_near_twice_the_typical_wait() {
        let mut w = used_to(10 * US);
        let small = budget(&mut w);
        // Slept after 20 µs, woken 6 µs later: spinning longer would have paid, the budget
        // doubles (the wake-up is cheaper than that).
        w.record(WaitEnd::Slept(small + 6 * US));
        let b = budget(&mut w);
        assert!(b >= 2 * small && b <= 2 * small + US, "doubled: {b:?}");
        for _ in 0..64 {
            w.record(WaitEnd::Spun(10 * US));
        }
        let b = budget(&mut w);
        assert!(b >= 20 * US && b <= 21 * US, "back to 2·typical: {b:?}");
    }

    /// Waits of a ping-pong whose wake-ups cost 200 µs (as under emulation): 25 µs, every
    /// sixth 80 µs. Returns how many of the last `n` of 10·`n` waits slept.
    fn sleeps_in_a_slow_tail(w: &mut Waiter, n: usize) -> usize {
        let mut slept = 0;
        for i in 0..10 * n {
            let wait = if i % 6 == 5 { 80 * US } else { 25 * US };
            let b = budget(w);
            if wait <= b {
                w.record(WaitEnd::Spun(wait));
            } else {
                w.record(WaitEnd::Slept(wait + 200 * US));
                slept += usize::from(i >= 9 * n);
            }
        }
        slept
    }

    #[test]
    fn a_costly_wake_up_makes_the_slow_tail_spin() {
        let mut w = adaptive();
        // Without the wake-up estimate, 5 of the last 60 waits sleep (each paying 200 µs).
        assert_eq!(sleeps_in_a_slow_tail(&mut w, 60), 0);
        assert_eq!(
            budget(&mut w),
            DEFAULT_SPIN_CAP,
            "spins as long as a sleep costs"
        );
        // Idle gaps (sleeps far beyond the cap) do not move the estimate of the wake-up: the
        // ping-pong afterwards still spins through its tail.
        for _ in 0..3 {
            budget(&mut w);
            w.record(WaitEnd::Slept(10_000 * US));
        }
        assert_eq!(sleeps_in_a_slow_tail(&mut w, 60), 0);
    }

    #[test]
    fn long_waits_back_off_to_sleeping_and_probes_find_short_ones_again() {
        let mut w = adaptive();
        // Kernels of 10 ms: spinning never pays.
        let mut spun = Duration::ZERO;
        for _ in 0..10 {
            spun += budget(&mut w);
            w.record(WaitEnd::Slept(10_000 * US));
        }
        assert_eq!(budget(&mut w), Duration::ZERO, "backed off");
        // About 1% of the 100 ms waited.
        assert!(spun < 1_000 * US, "backing off cost {spun:?}");
        // While sleeping at once, one wait in 16 probes (at most the cap).
        let mut probes = 0;
        for _ in 0..(16 * 4) {
            let b = budget(&mut w);
            if b > Duration::ZERO {
                probes += 1;
                assert!(b <= DEFAULT_SPIN_CAP, "{b:?}");
            }
            w.record(WaitEnd::Slept(10_000 * US));
        }
        assert_eq!(probes, 4);
        // Short waits again: the next probe hits and spinning resumes.
        while budget(&mut w).is_zero() {
            w.record(WaitEnd::Slept(10_000 * US));
        }
        w.record(WaitEnd::Spun(10 * US));
        assert!(budget(&mut w) > Duration::ZERO);
    }

    #[test]
    fn a_few_long_waits_do_not_shrink_the_budget() {
        let mut w = used_to(40 * US);
        let before = budget(&mut w);
        // The memory-region setup, say; then short waits again.
        w.record(WaitEnd::Slept(5_000 * US));
        assert_eq!(budget(&mut w), before);
        w.record(WaitEnd::Spun(40 * US));
        for _ in 0..3 {
            w.record(WaitEnd::Slept(5_000 * US));
        }
        let again = budget(&mut w);
        w.record(WaitEnd::Spun(40 * US));
        assert!(budget(&mut w) >= again, "not in a row");
        for _ in 0..3 {
            w.record(WaitEnd::Slept(5_000 * US));
        }
        let before = budget(&mut w);
        w.record(WaitEnd::Slept(5_000 * US));
        assert_eq!(budget(&mut w), before / 2, "the fourth in a row halves it");
    }

    #[test]
    fn recent_hits_keep_spinning_as_long_as_they_take() {
        let mut w = adaptive();
        // A ping-pong whose peer sleeps: one wait in four still ends while spinning (60 µs),
        // the others take 5 ms.
        for _ in 0..64 {
            w.record(WaitEnd::Spun(60 * US));
            for _ in 0..3 {
                w.record(WaitEnd::Slept(5_000 * US));
            }
        }
        let b = budget(&mut w);
        assert!(b >= 110 * US && b <= DEFAULT_SPIN_CAP, "{b:?}");
        // No hit for 64 waits: the budget halves down to nothing.
        for _ in 0..72 {
            w.record(WaitEnd::Slept(5_000 * US));
        }
        assert_eq!(budget(&mut w), Duration::ZERO);
    }

    #[test]
    fn a_short_wait_after_sleeping_at_once_restores_spinning() {
        let mut w = adaptive();
        for _ in 0..12 {
            w.record(WaitEnd::TimedOut(100_000 * US));
        }
        assert_eq!(budget(&mut w), Duration::ZERO);
        w.record(WaitEnd::Slept(30 * US));
        assert!(budget(&mut w) >= FLOOR);
    }

    #[test]
    fn short_timeouts_teach_nothing() {
        let mut w = adaptive();
        let before = budget(&mut w);
        for _ in 0..32 {
            w.record(WaitEnd::TimedOut(10 * US));
        }
        assert_eq!(budget(&mut w), before);
    }

    #[test]
    fn busy_cpus_make_an_adaptive_wait_sleep_at_once() {
        let mut w = adaptive();
        let budget = w.spin_budget();
        let plan = w.plan_given(budget, |_| true, SpinSlot::take);
        assert_eq!(plan.budget, Some(Duration::ZERO), "busy: sleep at once");
        assert!(plan.slot.is_none());
        // The wait slept without spinning: learned as a wait that did not spin.
        w.record(WaitEnd::Slept(30 * US));
        let budget = w.spin_budget();
        let plan = w.plan_given(budget, |_| false, SpinSlot::take);
        assert!(plan.budget.is_some_and(|b| b > Duration::ZERO), "{plan:?}");
        assert!(plan.slot.is_some(), "a free CPU: spins in a slot");
    }

    #[test]
    fn a_wait_that_finds_every_spin_slot_taken_sleeps_at_once() {
        for policy in [
            WaitPolicy::Spin(Duration::from_secs(2)),
            WaitPolicy::default(),
        ] {
            let mut w = Waiter::new(policy);
            let budget = w.spin_budget();
            let plan = w.plan_given(budget, |_| false, || None);
            assert_eq!(plan.budget, Some(Duration::ZERO), "{policy}: sleep at once");
            assert!(plan.slot.is_none());
        }
        // Polling never asks for a slot: it spins until the deadline.
        let mut w = Waiter::new(WaitPolicy::Poll);
        let budget = w.spin_budget();
        let plan = w.plan_given(budget, |_| true, || None);
        assert_eq!(plan.budget, None);
    }

    #[test]
    fn fixed_policies_do_not_learn() {
        for (policy, want) in [
            (WaitPolicy::Poll, None),
            (WaitPolicy::Sleep, Some(Duration::ZERO)),
            (WaitPolicy::Spin(300 * US), Some(300 * US)),
        ] {
            let mut w = Waiter::new(policy);
            for end in [
                WaitEnd::Spun(US),
                WaitEnd::Slept(Duration::from_secs(1)),
                WaitEnd::TimedOut(Duration::from_secs(1)),
            ] {
                w.record(end);
                assert_eq!(w.spin_budget(), want, "{policy}");
            }
        }
    }

    #[test]
    fn policies_parse_and_print() {
        for (text, policy) in [
            ("adaptive", WaitPolicy::default()),
            (" Adaptive:500 ", WaitPolicy::Adaptive { cap: 500 * US }),
            ("poll", WaitPolicy::Poll),
            ("SLEEP", WaitPolicy::Sleep),
            ("spin:0", WaitPolicy::Spin(Duration::ZERO)),
            ("spin: 100000", WaitPolicy::Spin(100_000 * US)),
        ] {
            let parsed: WaitPolicy = text.parse().unwrap();
            assert_eq!(parsed, policy, "{text}");
            assert_eq!(parsed.to_string().parse::<WaitPolicy>(), Ok(policy));
        }
        for bad in [
            "",
            "spin",
            "poll:3",
            "adaptive:",
            "spin:-1",
            "spin:2000000",
            "busy",
        ] {
            let e = bad.parse::<WaitPolicy>().unwrap_err().to_string();
            assert!(e.contains("adaptive") && e.contains("poll"), "{bad}: {e}");
        }
    }
}
