//! CPU time spent on RPCs, so that a waiting policy that spins is not mistaken for speed: the
//! calling (client) thread's, and the other side's: this process's other threads (the
//! in-process software NAA's workers and the transport's threads), or with `--naa-pid` the
//! NAA's own process on this host.

use std::time::Duration;

use rustix::time::{ClockId, Timespec, clock_gettime};

use crate::base::process_clock::ProcessClock;

fn duration(t: Timespec) -> Duration {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0);
    Duration::new(secs, nanos)
}

/// The CPU clocks at one moment: this thread's, and the other side's (`None`: unreadable,
/// the NAA's process has exited).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuStamp {
    thread: Duration,
    others: Option<Duration>,
}

impl CpuStamp {
    /// Now; `naa` is the NAA's process clock (`--naa-pid`), or `None` for this process's
    /// other threads.
    pub(crate) fn now(naa: Option<&ProcessClock>) -> Self {
        let thread = duration(clock_gettime(ClockId::ThreadCPUTime));
        let others = match naa {
            Some(clock) => clock.read(),
            None => Some(duration(clock_gettime(ClockId::ProcessCPUTime)).saturating_sub(thread)),
        };
        Self { thread, others }
    }
}

/// CPU time summed over some RPCs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuUse {
    /// CPU time of the calling (client) thread.
    pub client: Duration,
    /// CPU time of the other side (see [`CpuStamp::now`]).
    pub others: Duration,
    /// True once a reading of the other side failed: `others` is then incomplete.
    pub others_lost: bool,
    /// RPCs counted.
    pub rpcs: u32,
}

impl CpuUse {
    /// Adds `rpcs` RPCs that ran from `start` until `end`.
    pub(crate) fn add(&mut self, start: CpuStamp, end: CpuStamp, rpcs: u32) {
        self.client += end.thread.saturating_sub(start.thread);
        match (start.others, end.others) {
            (Some(a), Some(b)) => self.others += b.saturating_sub(a),
            _ => self.others_lost = true,
        }
        self.rpcs += rpcs;
    }

    /// Per RPC in seconds: (client thread, other side); `None` without RPCs, and for the
    /// other side once a reading of it failed.
    pub(crate) fn per_rpc(&self) -> (Option<f64>, Option<f64>) {
        if self.rpcs == 0 {
            return (None, None);
        }
        let n = f64::from(self.rpcs);
        (
            Some(self.client.as_secs_f64() / n),
            (!self.others_lost).then(|| self.others.as_secs_f64() / n),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burn() {
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }

    #[test]
    fn busy_work_on_this_thread_is_counted_as_the_clients() {
        let mut cpu = CpuUse::default();
        assert_eq!(cpu.per_rpc(), (None, None));
        let start = CpuStamp::now(None);
        burn();
        cpu.add(start, CpuStamp::now(None), 1);
        let (client, others) = cpu.per_rpc();
        assert!(client.expect("one RPC") > 0.0, "{cpu:?}");
        assert!(others.is_some(), "{cpu:?}");
        assert_eq!(cpu.rpcs, 1);
    }

    #[test]
    fn with_a_process_clock_the_other_side_is_that_process() {
        // This process as "the NAA's": its clock includes this thread's busy work.
        let clock = ProcessClock::of(std::process::id()).expect("this process");
        let mut cpu = CpuUse::default();
        let start = CpuStamp::now(Some(&clock));
        burn();
        cpu.add(start, CpuStamp::now(Some(&clock)), 2);
        let (client, others) = cpu.per_rpc();
        let (client, others) = (client.expect("RPCs"), others.expect("readable"));
        assert!(client > 0.0 && others >= client * 0.9, "{cpu:?}");
    }

    #[test]
    fn a_failed_reading_of_the_other_side_leaves_it_unknown() {
        let mut cpu = CpuUse::default();
        let mut start = CpuStamp::now(None);
        start.others = None;
        cpu.add(start, CpuStamp::now(None), 1);
        cpu.add(CpuStamp::now(None), CpuStamp::now(None), 1);
        let (client, others) = cpu.per_rpc();
        assert!(client.is_some());
        assert_eq!(others, None, "{cpu:?}");
    }
}
