//! A client through the C ABI (`--api c`): `naa_create` with one in-place parameter, then
//! `naa_invoke` + `naa_wait` per RPC, `naa_finalize` at the end: the calls of a C program
//! linked with `libnaaice_ap2`, made here directly on the `naaice-capi` crate. The NAA comes
//! from `NAA_SPEC`, which the benchmark sets for its client processes. The only `unsafe`
//! code of the client side.

use std::ffi::{CStr, c_uint};

use naaice_ap2::ap2::{naa_create, naa_finalize, naa_invoke, naa_wait};
use naaice_ap2::error::naa_last_error;
use naaice_ap2::{CBool, naa_handle, naa_param_t, naa_status};

use crate::Error;
use crate::clients::worker::{Client, with_hint};

/// One `naa_handle` and the memory of its parameter.
pub(crate) struct CClient {
    handle: naa_handle,
    /// The parameter's memory: the library reads and writes it during RPCs; its heap block
    /// never moves or shrinks while the handle lives (dropped after `naa_finalize`).
    _memory: Vec<u8>,
}

/// The calling thread's last error of the C ABI.
fn last_error(call: &str) -> Error {
    let text = naa_last_error();
    let text = if text.is_null() {
        "(no message)".to_owned()
    } else {
        // SAFETY: naa_last_error returns NULL or a NUL-terminated string that stays valid
        // until this thread's next call into the library; it is copied at once.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    format!("{call}: {text}").into()
}

impl CClient {
    /// `naa_create(fncode, {memory}, 1, {memory}, 1, &handle)` with `size` bytes in place.
    pub(crate) fn create(fncode: u8, size: u64) -> Result<Self, Error> {
        let mut memory: Vec<u8> = (0..usize::try_from(size)?).map(|i| i as u8).collect();
        let mut param = naa_param_t {
            addr: memory.as_mut_ptr().cast(),
            size: memory.len(),
            single_send: CBool(0),
        };
        let mut handle = naa_handle {
            function_code: 0,
            comm_ctx: std::ptr::null_mut(),
        };
        let one: c_uint = 1;
        // SAFETY: `param` is one valid naa_param_t (passed as the input and the output array
        // of length 1); its memory (`memory`'s heap block) stays allocated and untouched by us
        // until naa_finalize in Drop; `handle` is a valid, writable naa_handle.
        let rc = unsafe {
            naa_create(
                c_uint::from(fncode),
                &mut param,
                one,
                &mut param,
                one,
                &mut handle,
            )
        };
        if rc != 0 {
            return Err(with_hint(last_error("naa_create").to_string()));
        }
        Ok(Self {
            handle,
            _memory: memory,
        })
    }
}

impl Client for CClient {
    fn rpc(&mut self) -> Result<(), Error> {
        // SAFETY: `handle` was filled by a successful naa_create and is not finalized yet.
        if unsafe { naa_invoke(&mut self.handle) } != 0 {
            return Err(last_error("naa_invoke"));
        }
        let mut status = naa_status::in_state(naaice_ap2::naaice_communication_state::INIT);
        // SAFETY: as above; `status` is a valid, writable naa_status.
        if unsafe { naa_wait(&mut self.handle, &mut status) } != 0 {
            return Err(last_error("naa_wait"));
        }
        if status.naa_error.0 != 0 {
            return Err(format!("the NAA returned code {}", status.naa_error.0).into());
        }
        Ok(())
    }
}

impl Drop for CClient {
    fn drop(&mut self) {
        // SAFETY: `handle` came from naa_create (a failed or second finalize is harmless);
        // the field `_memory` is dropped only after this returned, as the C ABI requires.
        unsafe { naa_finalize(&mut self.handle) };
    }
}
