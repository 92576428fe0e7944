//! naaice-rs extension: large offloads that overlap transfer and compute (`naa_pipeline_*`,
//! the C face of `naaice::Pipeline`).
//!
//! ```c
//! naa_pipeline *p = naa_pipeline_create(7, 8 << 20, 2);   // NAA from NAA_SPEC
//! naa_pipeline_report report;
//! if (naa_pipeline_run(p, data, n_bytes, &report) != 0) { ... }
//! naa_pipeline_destroy(p);
//! ```

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Mutex;

use naaice::{NaaOptions, Pipeline};

use crate::boundary::{FAILURE, SUCCESS, check_ptr, fail, guard};
use crate::error::Failure;
use crate::handles::{Handles, as_ptr, id_of};
use crate::transport::transport_from_env;
use crate::types::naa_function_code_t;

/// A pipeline: connections to one NAA that keep several chunks of an array in flight (opaque;
/// the pointer is an identifier, never dereferenced).
pub struct naa_pipeline {
    _private: [u8; 0],
}

/// What `naa_pipeline_run` did.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct naa_pipeline_report {
    /// Chunks sent (one RPC each).
    pub chunks: u64,
    /// Connections used (chunks in flight at once).
    pub depth: c_uint,
    /// 1 when a chunk's kernel did not return success: `failed_chunk` and `failed_code` say
    /// which and what; the chunks after it were not sent. 0 otherwise.
    pub failed: c_int,
    /// The first chunk that failed (counted from 0).
    pub failed_chunk: u64,
    /// Its return code.
    pub failed_code: u32,
}

static PIPELINES: Handles<Mutex<Pipeline>> = Handles::new();

/// naaice-rs extension (not in the reference): connects up to `depth` (1-64) connections to
/// the NAA for `function_code` as `naa_create` does (`NAA_SPEC`, `NAAICE_TRANSPORT`, ...),
/// each with one in-place parameter of `chunk` bytes (1 B to 1 GiB). An NAA that takes fewer
/// connections gets fewer (see `naa_pipeline_depth`; at least 1).
///
/// The NAA's kernel runs on each chunk as on any RPC, so it must work chunk by chunk
/// (element-wise, or on independent blocks). It finds the chunk's number (0, 1, 2, …; 24
/// bits, wrapping) in the call's user bytes, big-endian; the last chunk is padded with zeros
/// to `chunk` bytes.
///
/// Returns NULL on failure. Free it with `naa_pipeline_destroy`.
#[unsafe(no_mangle)]
pub extern "C" fn naa_pipeline_create(
    function_code: naa_function_code_t,
    chunk: usize,
    depth: c_uint,
) -> *mut naa_pipeline {
    const NAME: &str = "naa_pipeline_create";
    guard(NAME, std::ptr::null_mut(), || {
        let made = (|| -> Result<Pipeline, Failure> {
            let transport = transport_from_env().map_err(Failure::config)?;
            let options = NaaOptions::from_env().map_err(|e| Failure::config(e.to_string()))?;
            Ok(Pipeline::create_with(
                &transport,
                function_code,
                chunk,
                depth as usize,
                &options,
            )?)
        })();
        match made {
            Ok(p) => as_ptr(PIPELINES.insert(Mutex::new(p))),
            Err(e) => {
                fail(
                    NAME,
                    e.context(format_args!("function code {function_code}")),
                );
                std::ptr::null_mut()
            }
        }
    })
}

/// naaice-rs extension (not in the reference): the connections of `pipeline` (chunks in
/// flight at once), or -1 for an invalid pipeline.
#[unsafe(no_mangle)]
pub extern "C" fn naa_pipeline_depth(pipeline: *const naa_pipeline) -> c_int {
    const NAME: &str = "naa_pipeline_depth";
    guard(NAME, FAILURE, || match PIPELINES.get(id_of(pipeline)) {
        Some(p) => {
            let depth = p.lock().unwrap_or_else(|e| e.into_inner()).depth();
            c_int::try_from(depth).unwrap_or(c_int::MAX)
        }
        None => fail(NAME, "not a pipeline (NULL, or destroyed)"),
    })
}

/// naaice-rs extension (not in the reference): runs the NAA's kernel over `len` bytes at
/// `data`, in place, chunk by chunk, one chunk in flight per connection. `report` (may be
/// NULL) tells what was done.
///
/// Returns 0 when every chunk's kernel returned success; -1 on invalid arguments, a
/// transport failure, or a chunk that failed (`report->failed`; the data of that chunk and
/// those after it is left as it was).
///
/// # Safety
///
/// `data` must be valid for reads and writes of `len` bytes (it may be NULL when `len` is
/// 0) and not used by another thread meanwhile; `report` must be NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_pipeline_run(
    pipeline: *mut naa_pipeline,
    data: *mut c_void,
    len: usize,
    report: *mut naa_pipeline_report,
) -> c_int {
    const NAME: &str = "naa_pipeline_run";
    guard(NAME, FAILURE, || {
        let Some(p) = PIPELINES.get(id_of(pipeline)) else {
            return fail(NAME, "not a pipeline (NULL, or destroyed)");
        };
        if len > 0
            && let Err(rc) = check_ptr(NAME, "data", data)
        {
            return rc;
        }
        let bytes: &mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: non-null; the caller guarantees `len` readable and writable bytes that
            // nothing else uses during the call.
            unsafe { std::slice::from_raw_parts_mut(data.cast::<u8>(), len) }
        };
        let ran = p.lock().unwrap_or_else(|e| e.into_inner()).run(bytes);
        let outcome = match ran {
            Ok(r) => r,
            Err(e) => return fail(NAME, e),
        };
        let mut out = naa_pipeline_report {
            chunks: outcome.chunks as u64,
            depth: c_uint::try_from(outcome.depth).unwrap_or(c_uint::MAX),
            ..naa_pipeline_report::default()
        };
        if let Some((chunk, code)) = outcome.failed {
            out.failed = 1;
            out.failed_chunk = chunk as u64;
            out.failed_code = code.get();
        }
        if !report.is_null() {
            // SAFETY: non-null; the caller guarantees it is writable.
            unsafe { report.write(out) };
        }
        match outcome.failed {
            Some((chunk, code)) => fail(
                NAME,
                format!("chunk {chunk}: the kernel returned {code}; later chunks not sent"),
            ),
            None => SUCCESS,
        }
    })
}

/// naaice-rs extension (not in the reference): closes the connections of `pipeline` and
/// frees it. Returns 0, or -1 for an invalid pipeline.
#[unsafe(no_mangle)]
pub extern "C" fn naa_pipeline_destroy(pipeline: *mut naa_pipeline) -> c_int {
    const NAME: &str = "naa_pipeline_destroy";
    guard(NAME, FAILURE, || match PIPELINES.remove(id_of(pipeline)) {
        Some(p) => {
            if let Ok(m) = std::sync::Arc::try_unwrap(p) {
                m.into_inner().unwrap_or_else(|e| e.into_inner()).finalize();
            }
            SUCCESS
        }
        None => fail(NAME, "not a pipeline (NULL, or destroyed)"),
    })
}
