//! The arguments of the AP1 functions, read from C and checked: arrays, strings, addresses,
//! region sizes and memory, the internal-region layout, and the constructor's [`Setup`].

use std::ffi::{CStr, c_char, c_uint};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::ptr::NonNull;

use naaice::Buffer;
use naaice::client::naa::NaaOptions;
use naaice::core::FunctionCode;

use super::session::{Flags, Setup};
use crate::ap1::types::MAX_MRS;
use crate::error::Failure;

/// Reads `n` elements at `ptr` (none if `n` is 0).
///
/// # Safety
/// If `n > 0`, `ptr` must be NULL or point to `n` readable elements.
pub(super) unsafe fn read_array<T: Copy>(
    ptr: *const T,
    n: usize,
    what: &str,
) -> Result<Vec<T>, Failure> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if ptr.is_null() {
        return Err(Failure::from(format!(
            "{what} is NULL but its count is {n}"
        )));
    }
    if !ptr.is_aligned() {
        return Err(Failure::from(format!("{what} is not aligned")));
    }
    // SAFETY: non-null and aligned; the caller guarantees `n` readable elements of plain data.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) }.to_vec())
}

/// Reads an optional C string.
///
/// # Safety
/// `s` must be NULL or point to a NUL-terminated string.
pub(super) unsafe fn read_str(s: *const c_char, what: &str) -> Result<Option<String>, Failure> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: non-null and NUL-terminated by the caller's guarantee.
    let text = unsafe { CStr::from_ptr(s) };
    let text = text
        .to_str()
        .map_err(|_| Failure::from(format!("{what} is not valid UTF-8")))?;
    Ok(Some(text.to_owned()).filter(|t| !t.is_empty()))
}

/// Resolves `host` (an IP address or a name) with `port`.
pub(super) fn resolve(host: &str, port: u16, what: &str) -> Result<SocketAddr, Failure> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Failure::config(format!("{what} {host:?} does not resolve")))
}

/// Checks region sizes: non-zero and below 4 GiB (the protocol's 32-bit sizes).
pub(super) fn check_size(size: usize, what: &str) -> Result<u64, Failure> {
    if size == 0 || u32::try_from(size).is_err() {
        return Err(Failure::from(format!(
            "{what}: size {size} is not in 1..=4294967295 (the protocol sends sizes as 32 bits)"
        )));
    }
    Ok(size as u64)
}

/// The program's parameter memory as buffers, checked: non-NULL, sizes in range, no two
/// regions overlapping.
pub(super) fn param_buffers(ptrs: &[*mut c_char], sizes: &[usize]) -> Result<Vec<Buffer>, Failure> {
    let mut spans: Vec<(usize, usize, usize)> = Vec::with_capacity(ptrs.len());
    for (i, (&p, &size)) in ptrs.iter().zip(sizes).enumerate() {
        if p.is_null() {
            return Err(Failure::from(format!("params[{i}] is NULL")));
        }
        check_size(size, &format!("params[{i}]"))?;
        let end = p
            .addr()
            .checked_add(size)
            .ok_or_else(|| Failure::from(format!("params[{i}]: memory wraps around")))?;
        spans.push((p.addr(), end, i));
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[0].1 > w[1].0 {
            return Err(Failure::from(format!(
                "params[{}] and params[{}] overlap (each region needs its own memory; for an \
                 in-place parameter mark one region as input and output)",
                w[0].2, w[1].2
            )));
        }
    }
    Ok(ptrs
        .iter()
        .zip(sizes)
        .map(|(&p, &size)| {
            let ptr = NonNull::new(p.cast::<u8>()).expect("checked above");
            // SAFETY: the C caller guarantees (documented contract of
            // naaice_init_communication_context, as for RDMA registration in the reference)
            // that `size` bytes at `p` are valid, stay allocated until
            // naaice_disconnect_and_cleanup and are not accessed while an RPC is in flight.
            // The regions do not overlap (checked above).
            unsafe { Buffer::from_raw_parts(ptr, size) }
        })
        .collect())
}

/// The requested NAA addresses of internal regions in the reference's sequential layout:
/// internal regions first from `offset`, each on a new 4 KiB page (spec section 2.5).
pub(super) fn internal_layout(offset: u64, sizes: &[u64]) -> Vec<u64> {
    let page = naaice::core::config::NAA_PAGE;
    let mut next = offset;
    sizes
        .iter()
        .map(|&s| {
            let addr = next;
            next = next.saturating_add(s.div_ceil(page).saturating_mul(page));
            addr
        })
        .collect()
}

/// Checks the constructor's arguments.
///
/// # Safety
/// As for `naaice_init_communication_context`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn make_setup(
    addr_offset: u64,
    param_sizes: *const usize,
    params: *const *mut c_char,
    params_amount: c_uint,
    internal_mr_amount: c_uint,
    internal_mr_sizes: *const usize,
    fncode: u8,
    local_address: *const c_char,
    remote_address: *const c_char,
    port: u16,
) -> Result<Setup, Failure> {
    let fncode = FunctionCode::new(fncode)
        .ok_or_else(|| Failure::from(format!("function code {fncode} is not in 1..=127")))?;
    let (n, n_internal) = (params_amount as usize, internal_mr_amount as usize);
    if n == 0 {
        return Err(Failure::from(
            "params_amount is 0 (at least one region is needed)",
        ));
    }
    if n + n_internal > MAX_MRS as usize {
        return Err(Failure::from(format!(
            "{n} parameter and {n_internal} internal regions (at most {MAX_MRS} in all)"
        )));
    }
    // SAFETY: forwarded caller guarantees.
    let (sizes, ptrs, internal) = unsafe {
        (
            read_array(param_sizes, n, "param_sizes")?,
            read_array(params, n, "params")?,
            read_array(internal_mr_sizes, n_internal, "internal_mr_sizes")?,
        )
    };
    let internal = internal
        .iter()
        .enumerate()
        .map(|(i, &s)| check_size(s, &format!("internal region {i}")))
        .collect::<Result<Vec<_>, _>>()?;
    // SAFETY: forwarded caller guarantees.
    let (remote, local) = unsafe {
        (
            read_str(remote_address, "remote_address")?,
            read_str(local_address, "local_address")?,
        )
    };
    let remote = remote.ok_or_else(|| Failure::from("remote_address is NULL or empty"))?;
    let remote = resolve(&remote, port, "remote_address")?;
    let local = local.map(|l| resolve(&l, 0, "local_address")).transpose()?;
    let params = param_buffers(&ptrs, &sizes)?;
    // The same variables, parsed by the same code, as `naa_create` and `Naa::create`.
    let options = NaaOptions::from_env().map_err(|e| Failure::config(e.to_string()))?;
    Ok(Setup {
        remote,
        local,
        fncode,
        addr_offset,
        flags: vec![Flags::default(); n],
        bytes_to_send: vec![None; n],
        params,
        internal,
        user: [0; 3],
        rpc_timeout: options.rpc_timeout,
        mrsp_timeout: options.mrsp_timeout,
        wait: options.wait,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_layout_is_sequential_in_pages() {
        assert_eq!(internal_layout(0, &[32]), vec![0]);
        assert_eq!(
            internal_layout(0x1000_0000, &[8192, 1, 4097]),
            vec![0x1000_0000, 0x1000_2000, 0x1000_3000]
        );
    }

    #[test]
    fn overlapping_parameters_are_refused() {
        let mut mem = vec![0u8; 256];
        let p = mem.as_mut_ptr().cast::<c_char>();
        let ok = param_buffers(&[p, p.wrapping_add(128)], &[128, 128]);
        assert_eq!(ok.map(|b| b.len()).ok(), Some(2));
        let e = param_buffers(&[p, p.wrapping_add(100)], &[128, 128])
            .err()
            .unwrap();
        assert!(e.message.contains("overlap"), "{e:?}");
        let e = param_buffers(&[std::ptr::null_mut()], &[8]).err().unwrap();
        assert!(e.message.contains("NULL"), "{e:?}");
        let e = param_buffers(&[p], &[0]).err().unwrap();
        assert!(e.message.contains("size 0"), "{e:?}");
    }
}
