//! [`ProcessClock`]: the CPU clock of another process on this host (the NAA's, given with
//! `--naa-pid`), read through POSIX `clock_getcpuclockid`. It counts every thread the process
//! ever ran, also those that have ended (a software NAA's per-connection workers).

use std::io;
use std::time::Duration;

/// The CPU-time clock of one process.
#[derive(Debug)]
pub(crate) struct ProcessClock {
    id: libc::clockid_t,
    pid: u32,
}

impl ProcessClock {
    /// The clock of process `pid`; an error if there is no such process (or its clock cannot
    /// be read).
    pub(crate) fn of(pid: u32) -> Result<Self, String> {
        let raw = libc::pid_t::try_from(pid)
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("--naa-pid {pid}: not a process id"))?;
        let mut id: libc::clockid_t = 0;
        // SAFETY: `id` is a valid, writable clockid_t for the duration of the call; the call
        // keeps no pointer.
        let rc = unsafe { libc::clock_getcpuclockid(raw, &mut id) };
        if rc != 0 {
            // It returns the error number instead of setting errno.
            let e = io::Error::from_raw_os_error(rc);
            return Err(format!(
                "--naa-pid {pid}: no CPU clock for that process ({e})"
            ));
        }
        let clock = Self { id, pid };
        clock
            .read()
            .ok_or_else(|| format!("--naa-pid {pid}: its CPU clock cannot be read"))?;
        Ok(clock)
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The CPU time the process used so far; `None` once it has exited.
    pub(crate) fn read(&self) -> Option<Duration> {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid, writable timespec for the duration of the call; the call
        // keeps no pointer.
        let rc = unsafe { libc::clock_gettime(self.id, &mut t) };
        if rc != 0 {
            return None;
        }
        let secs = u64::try_from(t.tv_sec).ok()?;
        let nanos = u32::try_from(t.tv_nsec).ok()?;
        Some(Duration::new(secs, nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_of_a_process_counts_its_cpu_time() {
        let clock = ProcessClock::of(std::process::id()).expect("this process");
        assert_eq!(clock.pid(), std::process::id());
        let before = clock.read().expect("readable");
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let after = clock.read().expect("readable");
        assert!(after > before, "{before:?} -> {after:?}");
    }

    #[test]
    fn a_process_that_ended_is_refused_with_its_pid() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        child.wait().expect("wait");
        // Reaped: the pid names no process (unless reused at once, which a test cannot rule
        // out, but which is vanishingly rare right after the exit).
        let e = ProcessClock::of(pid).expect_err("no such process");
        assert!(e.contains(&pid.to_string()), "{e}");
        assert!(ProcessClock::of(0).is_err());
    }
}
