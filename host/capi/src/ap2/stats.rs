//! naaice-rs extension (not in the reference): client statistics, over
//! [`naaice::Naa::stats`] and [`naaice::client::stats::process`].
//!
//! ```c
//! naa_client_stats s = { .size = sizeof s };
//! naa_stats(&handle, &s);                        // this handle's
//! printf("%llu RPCs, p99 %llu ns\n", (unsigned long long)s.rpcs,
//!        (unsigned long long)s.latency_p99_ns);
//! naa_stats_process(&s);                         // the process's handles that ended
//! ```

use std::ffi::c_int;
use std::time::Duration;

use naaice::client::stats::Stats;

use crate::ap2::on_naa;
use crate::boundary::{FAILURE, SUCCESS, fail, guard};
use crate::types::naa_handle;

/// The layout version `naa_stats` writes into `naa_client_stats.version`.
pub const NAA_CLIENT_STATS_VERSION: u32 = 1;

/// naaice-rs extension (not in the reference), client statistics: what a handle's RPCs (or
/// the process's ended handles') did. Versioned: set `size` to `sizeof(naa_client_stats)`
/// before the call; the library fills the fields that fit in `size` (later versions only
/// append fields) and sets `version`. Times are in nanoseconds; the latencies (invoke to
/// completion) are 0 before the first RPC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct naa_client_stats {
    /// Set by the caller: `sizeof(naa_client_stats)` as it was compiled.
    pub size: u32,
    /// Set by the library: the layout version it wrote (`NAA_CLIENT_STATS_VERSION`).
    pub version: u32,
    /// Handles summed up (1 for a handle's own).
    pub handles: u64,
    /// Connections made, the MRSP done (a handle reconnects after `naa_cancel`).
    pub connections: u64,
    /// RPCs the NAA answered, whatever their return code.
    pub rpcs: u64,
    /// RPCs the NAA answered with an error return code.
    pub errors_naa: u64,
    /// Deadlines that passed (connect, MRSP or RPC).
    pub errors_timeout: u64,
    /// Transport failures (connect refused, connection lost).
    pub errors_transport: u64,
    /// Protocol errors of the peer, refused MRSPs.
    pub errors_protocol: u64,
    /// Other errors.
    pub errors_other: u64,
    /// Bytes the RPCs wrote to the NAA.
    pub bytes_sent: u64,
    /// Bytes the NAA wrote back.
    pub bytes_received: u64,
    /// Time spent connecting, over all connections.
    pub connect_time_ns: u64,
    /// Time spent in the memory-region setup (MRSP), over all connections.
    pub mrsp_time_ns: u64,
    /// Median RPC latency.
    pub latency_p50_ns: u64,
    /// 90th percentile of the RPC latency.
    pub latency_p90_ns: u64,
    /// 99th percentile of the RPC latency.
    pub latency_p99_ns: u64,
    /// Longest RPC latency.
    pub latency_max_ns: u64,
    /// Mean RPC latency.
    pub latency_mean_ns: u64,
}

/// Nanoseconds, saturating.
fn ns(d: Option<Duration>) -> u64 {
    d.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl naa_client_stats {
    fn of(s: &Stats) -> Self {
        Self {
            size: size_of::<Self>() as u32,
            version: NAA_CLIENT_STATS_VERSION,
            handles: s.handles,
            connections: s.connections,
            rpcs: s.rpcs,
            errors_naa: s.errors.naa,
            errors_timeout: s.errors.timeout,
            errors_transport: s.errors.transport,
            errors_protocol: s.errors.protocol,
            errors_other: s.errors.other,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            connect_time_ns: ns(Some(s.connect_time)),
            mrsp_time_ns: ns(Some(s.mrsp_time)),
            latency_p50_ns: ns(s.latency(0.5)),
            latency_p90_ns: ns(s.latency(0.9)),
            latency_p99_ns: ns(s.latency(0.99)),
            latency_max_ns: ns(s.latency_max()),
            latency_mean_ns: ns(s.latency_mean()),
        }
    }
}

/// Checks `out` (non-null, aligned, `size` at least version 1's) before anything is written.
///
/// # Safety
/// `out` must be NULL or point to at least `size_of::<u32>()` readable bytes.
unsafe fn check_out(name: &'static str, out: *mut naa_client_stats) -> Result<(), c_int> {
    if out.is_null() || !out.is_aligned() {
        return Err(fail(name, "out is NULL or not aligned"));
    }
    // SAFETY: non-null and aligned; its first field is readable by the caller's guarantee.
    let size = unsafe { (&raw const (*out).size).read() };
    if (size as usize) < size_of::<naa_client_stats>() {
        return Err(fail(
            name,
            format!(
                "out->size is {size}: set it to sizeof(naa_client_stats) ({} in this version)",
                size_of::<naa_client_stats>()
            ),
        ));
    }
    Ok(())
}

/// Writes `stats` to `out` (checked by [`check_out`]).
///
/// # Safety
/// `out` must have passed [`check_out`] and be writable for its `size`.
unsafe fn write(out: *mut naa_client_stats, stats: &Stats) {
    // SAFETY: checked non-null, aligned and at least this version's size; writable by the
    // caller's guarantee. Later versions append fields and write what the caller's size holds.
    unsafe { out.write(naa_client_stats::of(stats)) };
}

/// ==== naaice-rs extension (not in the reference): client statistics ====
///
/// Fills `out` with the statistics of `handle`'s RPCs (see `naa_client_stats`; set
/// `out->size = sizeof(naa_client_stats)` first). Blocks while another thread waits on the
/// handle.
///
/// Returns 0 on success; -1 if `handle` is not a live handle, or `out` is NULL or its `size`
/// is smaller than version 1's (nothing is written then).
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`; `out` must be NULL or point to a
/// writable `naa_client_stats` whose `size` the caller set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_stats(handle: *mut naa_handle, out: *mut naa_client_stats) -> c_int {
    const NAME: &str = "naa_stats";
    guard(NAME, FAILURE, || {
        // SAFETY: forwarded caller guarantee.
        if let Err(rc) = unsafe { check_out(NAME, out) } {
            return rc;
        }
        // SAFETY: forwarded caller guarantee.
        unsafe {
            on_naa(NAME, handle, |naa| {
                write(out, &naa.stats());
                SUCCESS
            })
        }
    })
}

/// Fills `out` with the statistics of the process's handles that ended (finalized), as
/// `NAAICE_STATS=1` prints them at exit. Set `out->size = sizeof(naa_client_stats)` first.
///
/// Returns 0 on success; -1 if `out` is NULL or its `size` is smaller than version 1's.
///
/// # Safety
/// `out` must be NULL or point to a writable `naa_client_stats` whose `size` the caller set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_stats_process(out: *mut naa_client_stats) -> c_int {
    const NAME: &str = "naa_stats_process";
    guard(NAME, FAILURE, || {
        // SAFETY: forwarded caller guarantee.
        if let Err(rc) = unsafe { check_out(NAME, out) } {
            return rc;
        }
        // SAFETY: checked above; writable by the caller's guarantee.
        unsafe { write(out, &naaice::client::stats::process()) };
        SUCCESS
    })
}
