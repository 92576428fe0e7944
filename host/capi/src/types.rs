//! The C types of the middleware API, laid out exactly like the C reference's (spec section 6.1).
//!
//! Layouts on LP64 (x86-64, aarch64), checked by the tests below and by a C test against the
//! reference's definitions: `naa_param_t` 24 bytes (`addr` 0, `size` 8, `single_send` 16),
//! `naa_handle` 16 bytes (`function_code` 0, `comm_ctx` 8), `naa_status` 16 bytes (`state` 0,
//! `naa_error` 4, `bytes_received` 8), both enums 4 bytes.

use std::ffi::{c_uint, c_void};

pub use crate::ap1::types::{naaice_communication_context, naaice_communication_state};

/// Function code type of the reference (`naa_function_code_t`, a 32-bit unsigned integer).
pub type naa_function_code_t = c_uint;

/// A C `bool` read as a byte (`bool` in the header). Any non-zero value counts as true, so a
/// field the C program left uninitialised is not undefined behaviour on the Rust side.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CBool(pub u8);

impl CBool {
    /// True if non-zero.
    pub fn get(self) -> bool {
        self.0 != 0
    }
}

/// The value of a C `enum naa_error` (`enum naa_error` in the header). Besides the three
/// enumerators it carries reserved (0x03-0x0F) and application-defined (0x10-0x7F and up)
/// return codes, which a Rust enum could not hold.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NaaErrorValue(pub c_uint);

/// One parameter of an NAA call: `size` bytes at `addr`, optionally transferred only in the
/// first RPC.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct naa_param_t {
    /// Start of the parameter's memory.
    pub addr: *mut c_void,
    /// Length in bytes.
    pub size: usize,
    /// Transfer this input only with the first RPC (spec section 3.3).
    pub single_send: CBool,
}

/// A connection to an NAA prepared for one function, filled in by `naa_create`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct naa_handle {
    /// The function code passed to `naa_create` (0 when `naa_create` failed).
    pub function_code: naa_function_code_t,
    /// The library's context; NULL when `naa_create` failed or after `naa_finalize`.
    pub comm_ctx: *mut naaice_communication_context,
}

/// Return codes of the NAA (`status.naa_error`). 0x04-0x0F are reserved, 0x10-0x7F are
/// application-defined.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::upper_case_acronyms)]
pub enum naa_error {
    /// The RPC succeeded.
    NAA_SUCCESS = 0x00,
    /// The NAA has no kernel for the function code.
    SOCKET_UNAVAIL = 0x01,
    /// The kernel did not finish in time.
    KERNEL_TIMEOUT = 0x02,
    /// The kernel ran but failed (a naaice-rs assignment from the reserved range: a software
    /// NAA's kernel that panicked, a kernel unit's status that does not fit 24 bits).
    KERNEL_FAILED = 0x03,
}

/// Status of the last RPC.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct naa_status {
    /// Communication state: FINISHED after a completed RPC, ERROR after a failure.
    pub state: naaice_communication_state,
    /// The NAA's return code (the reference keeps only its low byte; this keeps all 24 bits).
    pub naa_error: NaaErrorValue,
    /// Length of the NAA's final write.
    pub bytes_received: u64,
}

impl naa_status {
    /// A status in `state` with no return code and no bytes.
    pub fn in_state(state: naaice_communication_state) -> Self {
        Self {
            state,
            naa_error: NaaErrorValue(0),
            bytes_received: 0,
        }
    }
}

impl From<&naaice::Status> for naa_status {
    fn from(s: &naaice::Status) -> Self {
        Self {
            state: s.state.into(),
            naa_error: NaaErrorValue(s.naa_error.get()),
            bytes_received: s.bytes_received,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use naaice::core::Phase;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn layouts_match_the_reference_on_lp64() {
        assert_eq!(size_of::<naa_param_t>(), 24);
        assert_eq!(align_of::<naa_param_t>(), 8);
        assert_eq!(offset_of!(naa_param_t, addr), 0);
        assert_eq!(offset_of!(naa_param_t, size), 8);
        assert_eq!(offset_of!(naa_param_t, single_send), 16);

        assert_eq!(size_of::<naa_handle>(), 16);
        assert_eq!(offset_of!(naa_handle, function_code), 0);
        assert_eq!(offset_of!(naa_handle, comm_ctx), 8);

        assert_eq!(size_of::<naa_status>(), 16);
        assert_eq!(offset_of!(naa_status, state), 0);
        assert_eq!(offset_of!(naa_status, naa_error), 4);
        assert_eq!(offset_of!(naa_status, bytes_received), 8);

        assert_eq!(size_of::<naaice_communication_state>(), 4);
        assert_eq!(size_of::<naa_error>(), 4);
        assert_eq!(size_of::<NaaErrorValue>(), 4);
        assert_eq!(size_of::<CBool>(), 1);
    }

    #[test]
    fn state_values_are_the_spec_values() {
        for p in [
            Phase::Init,
            Phase::Ready,
            Phase::Connected,
            Phase::Disconnected,
            Phase::MrspSending,
            Phase::MrspReceiving,
            Phase::MrspDone,
            Phase::DataSending,
            Phase::Calculating,
            Phase::DataReceiving,
            Phase::Finished,
            Phase::Error,
        ] {
            assert_eq!(
                naaice_communication_state::from(p) as u32,
                u32::from(p.value())
            );
        }
        assert_eq!(naa_error::KERNEL_TIMEOUT as u32, 2);
        // Each C name is the library's return code of that name.
        for (c, rust) in [
            (naa_error::NAA_SUCCESS, naaice::core::ReturnCode::SUCCESS),
            (
                naa_error::SOCKET_UNAVAIL,
                naaice::core::ReturnCode::SOCKET_UNAVAIL,
            ),
            (
                naa_error::KERNEL_TIMEOUT,
                naaice::core::ReturnCode::KERNEL_TIMEOUT,
            ),
            (
                naa_error::KERNEL_FAILED,
                naaice::core::ReturnCode::KERNEL_FAILED,
            ),
        ] {
            assert_eq!(c as u32, rust.get(), "{c:?}");
        }
    }

    #[test]
    fn any_nonzero_byte_is_true() {
        assert!(!CBool(0).get());
        assert!(CBool(1).get());
        assert!(CBool(0xA5).get());
    }
}
