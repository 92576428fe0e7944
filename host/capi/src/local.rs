//! naaice-rs extension (not in the reference): local (lookaside) mode for C programs.
//!
//! An `NAA_SPEC` entry `local:FN_CODE:PARAM_COUNT` makes `naa_create` connect to an NAA inside
//! the program (a software NAA on the loopback interface, whatever `NAAICE_TRANSPORT` says;
//! [`naaice::swnaa::local`]) with the built-in kernels (1 adds 1 to every byte, 2 adds 2, 3 does
//! nothing) and those registered with `naa_local_register_kernel`. The program itself does
//! not change: the same binary runs against local, software and FPGA NAAs, only `NAA_SPEC`
//! differs, and registering a local kernel is harmless when `NAA_SPEC` names a remote NAA.
//!
//! ```c
//! naa_local_register_kernel(10, vector_add, NULL);  // used by NAA_SPEC=local:10:2
//! naa_create(10, inputs, 2, outputs, 1, &handle);   // local, software or FPGA NAA
//! ```

use std::ffi::{c_int, c_uint, c_void};

use crate::boundary::{FAILURE, SUCCESS, fail, guard};
use crate::swnaa::{c_kernel, function_code, naa_swnaa_kernel};

/// ==== naaice-rs extensions (not in the reference): local (lookaside) mode ====
///
/// `NAA_SPEC=local:FN_CODE:PARAM_COUNT` runs the kernel inside the program (an in-process
/// software NAA on the loopback interface, whatever `NAAICE_TRANSPORT` says), with the same
/// API and the built-in kernels (1 adds 1 to every byte, 2 adds 2, 3 does nothing); the same
/// program runs unchanged against local, software and FPGA NAAs.
///
/// Registers (or replaces) the kernel for `fncode` (1-127) of the program's local NAA (the
/// `NAA_SPEC` entries `local:FN_CODE:PARAM_COUNT`), with the signature and return codes of
/// `naa_swnaa_register_kernel`. Handles created afterwards see it (handles created before
/// keep the kernels they started with). `user_data` is passed to every call. Kernels run on
/// library threads, several at once for different handles: the kernel and `user_data` must
/// be thread-safe and stay valid until the program ends.
///
/// Returns 0, or -1 (function code not 1-127, kernel NULL).
#[unsafe(no_mangle)]
pub extern "C" fn naa_local_register_kernel(
    fncode: c_uint,
    kernel: naa_swnaa_kernel,
    user_data: *mut c_void,
) -> c_int {
    const NAME: &str = "naa_local_register_kernel";
    guard(NAME, FAILURE, || {
        let code = match function_code(NAME, fncode) {
            Ok(c) => c,
            Err(rc) => return rc,
        };
        let Some(run) = kernel else {
            return fail(NAME, "kernel is NULL");
        };
        naaice::swnaa::local::register_kernel(code, c_kernel(run, user_data));
        SUCCESS
    })
}

/// Removes the local NAA's kernel for `fncode` (also a built-in one): RPCs of handles
/// created afterwards with this code are answered with SOCKET_UNAVAIL.
///
/// Returns 0, or -1 (function code not 1-127, no such kernel).
#[unsafe(no_mangle)]
pub extern "C" fn naa_local_remove_kernel(fncode: c_uint) -> c_int {
    const NAME: &str = "naa_local_remove_kernel";
    guard(NAME, FAILURE, || {
        let code = match function_code(NAME, fncode) {
            Ok(c) => c,
            Err(rc) => return rc,
        };
        match naaice::swnaa::local::remove_kernel(code) {
            Some(_) => SUCCESS,
            None => fail(NAME, format!("no local kernel for function code {fncode}")),
        }
    })
}
