//! CPU time spent on RPCs, so that a waiting policy that spins is not mistaken for speed: the
//! calling (client) thread's, and that of every other thread of this process (the in-process
//! software NAA's workers and the transport's threads).

use std::time::Duration;

use rustix::time::{ClockId, Timespec, clock_gettime};

fn duration(t: Timespec) -> Duration {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0);
    Duration::new(secs, nanos)
}

/// The CPU clocks of this thread and this process at one moment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuStamp {
    thread: Duration,
    process: Duration,
}

impl CpuStamp {
    /// Now.
    pub(crate) fn now() -> Self {
        Self {
            thread: duration(clock_gettime(ClockId::ThreadCPUTime)),
            process: duration(clock_gettime(ClockId::ProcessCPUTime)),
        }
    }
}

/// CPU time summed over some RPCs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuUse {
    /// CPU time of the calling (client) thread.
    pub client: Duration,
    /// CPU time of the process's other threads.
    pub others: Duration,
    /// RPCs counted.
    pub rpcs: u32,
}

impl CpuUse {
    /// Adds `rpcs` RPCs that ran from `start` until now.
    pub(crate) fn add_since(&mut self, start: CpuStamp, rpcs: u32) {
        let end = CpuStamp::now();
        let thread = end.thread.saturating_sub(start.thread);
        let process = end.process.saturating_sub(start.process);
        self.client += thread;
        self.others += process.saturating_sub(thread);
        self.rpcs += rpcs;
    }

    /// Per RPC in seconds: (client thread, other threads); `None` without RPCs.
    pub(crate) fn per_rpc(&self) -> Option<(f64, f64)> {
        (self.rpcs > 0).then(|| {
            let n = f64::from(self.rpcs);
            (self.client.as_secs_f64() / n, self.others.as_secs_f64() / n)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_on_this_thread_is_counted_as_the_clients() {
        let mut cpu = CpuUse::default();
        assert_eq!(cpu.per_rpc(), None);
        let start = CpuStamp::now();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        cpu.add_since(start, 1);
        let (client, _others) = cpu.per_rpc().expect("one RPC");
        assert!(client > 0.0, "{cpu:?}");
        assert_eq!(cpu.rpcs, 1);
    }
}
