//! The 32-bit immediates of RDMA WRITE WITH IMMEDIATE (spec §3.2, §3.7).
//!
//! Values here are host-order integers; the wire carries them big-endian
//! (`value.to_be_bytes()`).
//!
//! * Client → NAA: `value = (fncode | 0x80) | user[0] << 8 | user[1] << 16 | user[2] << 24`.
//!   The 0x80 bit is the "start RPC" marker (quirk Q-1). A value of 0 is the client's
//!   "host-side error" signal.
//! * NAA → client: `value = return_code << 8` (quirk Q-2); the low byte is ignored.

/// The "start RPC" marker OR-ed into the client's function-code byte.
pub const START_MARKER: u8 = 0x80;

/// The client's error signal (spec §3.5): a zero-length WRITE WITH IMM with value 0.
pub const CLIENT_ERROR_VALUE: u32 = 0;

/// A function code: selects the NAA kernel. Valid codes are 1..=127 (the 0x80 bit is the
/// marker and 0 is the error signal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FunctionCode(u8);

impl FunctionCode {
    /// The lowest valid code.
    pub const MIN: u8 = 1;
    /// The highest valid code.
    pub const MAX: u8 = 127;

    /// A function code, if `code` is in 1..=127.
    pub const fn new(code: u8) -> Option<Self> {
        if code >= Self::MIN && code <= Self::MAX {
            Some(Self(code))
        } else {
            None
        }
    }

    /// The code.
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl core::fmt::Display for FunctionCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Encodes the client → NAA immediate.
pub const fn encode_request(fncode: FunctionCode, user: [u8; 3]) -> u32 {
    (fncode.0 | START_MARKER) as u32
        | (user[0] as u32) << 8
        | (user[1] as u32) << 16
        | (user[2] as u32) << 24
}

/// A client → NAA immediate as the NAA decodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Request {
    /// Run the kernel with function code `fncode` (`value & 0x7F`, which may be 0 or an
    /// unknown code; the NAA answers those with SOCKET_UNAVAIL).
    Call {
        /// The low 7 bits of the value.
        fncode: u8,
        /// The three user bytes (`user[0]` = bits 15..8).
        user: [u8; 3],
    },
    /// Value 0: the client signals a host-side error (spec §3.5).
    ClientError,
}

impl Request {
    /// Decodes an immediate value the way the C software NAA does (spec §10.5).
    pub const fn decode(value: u32) -> Self {
        if value == CLIENT_ERROR_VALUE {
            return Self::ClientError;
        }
        let b = value.to_le_bytes();
        Self::Call {
            fncode: b[0] & !START_MARKER,
            user: [b[1], b[2], b[3]],
        }
    }

    /// The user bytes as the C NAA keeps them for kernels: `value & 0xFFFF_FF00`.
    pub const fn user_word(user: [u8; 3]) -> u32 {
        (user[0] as u32) << 8 | (user[1] as u32) << 16 | (user[2] as u32) << 24
    }
}

/// The return code of an RPC: a 24-bit value carried in bits 31..8 of the NAA's immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReturnCode(u32);

/// What a [`ReturnCode`] means (spec §3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReturnClass {
    /// 0x00: NAA_SUCCESS.
    Success,
    /// 0x01: SOCKET_UNAVAIL, no kernel for the function code.
    SocketUnavail,
    /// 0x02: KERNEL_TIMEOUT.
    KernelTimeout,
    /// 0x03–0x0F: reserved.
    Reserved,
    /// 0x10–0x7F: application-defined.
    Application,
    /// 0x80 and above: not defined by the protocol.
    Undefined,
}

impl ReturnCode {
    /// NAA_SUCCESS (0x00).
    pub const SUCCESS: Self = Self(0x00);
    /// SOCKET_UNAVAIL (0x01): no kernel for the requested function code.
    pub const SOCKET_UNAVAIL: Self = Self(0x01);
    /// KERNEL_TIMEOUT (0x02).
    pub const KERNEL_TIMEOUT: Self = Self(0x02);
    /// KERNEL_FAILED (0x03, a naaice-rs assignment): the kernel ran but failed (it panicked,
    /// or the kernel unit reported a status that does not fit the 24-bit field).
    ///
    /// Spec §3.7 gives 0x00–0x02 their meanings, reserves 0x03–0x0F for the protocol and
    /// leaves 0x10–0x7F to applications, so an NAA-generated failure belongs in the reserved
    /// range, where no application code can mean something else; 0x03 is its first value.
    /// It also survives the C API's 8-bit `naa_error` unchanged (0xFF_FFFF, the firmware's
    /// former choice, would show up there as the undefined 0xFF).
    pub const KERNEL_FAILED: Self = Self(0x03);
    /// The largest value the 24-bit field holds.
    pub const MAX_VALUE: u32 = 0x00FF_FFFF;

    /// A return code, if `code` fits 24 bits.
    pub const fn new(code: u32) -> Option<Self> {
        if code <= Self::MAX_VALUE {
            Some(Self(code))
        } else {
            None
        }
    }

    /// An application error code, if `code` is in 0x10..=0x7F.
    pub const fn application(code: u8) -> Option<Self> {
        if code >= 0x10 && code <= 0x7F {
            Some(Self(code as u32))
        } else {
            None
        }
    }

    /// The full 24-bit value.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The low 8 bits: what the C API exposes as `naa_error`.
    pub const fn naa_error(self) -> u8 {
        self.0 as u8
    }

    /// True for NAA_SUCCESS.
    pub const fn is_success(self) -> bool {
        self.0 == 0
    }

    /// The class of the code.
    pub const fn class(self) -> ReturnClass {
        match self.0 {
            0x00 => ReturnClass::Success,
            0x01 => ReturnClass::SocketUnavail,
            0x02 => ReturnClass::KernelTimeout,
            0x03..=0x0F => ReturnClass::Reserved,
            0x10..=0x7F => ReturnClass::Application,
            _ => ReturnClass::Undefined,
        }
    }

    /// Encodes the NAA → client immediate: `code << 8`, low byte 0.
    pub const fn to_imm(self) -> u32 {
        self.0 << 8
    }

    /// Decodes the NAA → client immediate: `value >> 8`; the low byte is ignored.
    pub const fn from_imm(value: u32) -> Self {
        Self(value >> 8)
    }
}

impl core::fmt::Display for ReturnCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.class() {
            ReturnClass::Success => f.write_str("NAA_SUCCESS"),
            ReturnClass::SocketUnavail => {
                f.write_str("SOCKET_UNAVAIL (no kernel for the function code)")
            }
            ReturnClass::KernelTimeout => f.write_str("KERNEL_TIMEOUT"),
            ReturnClass::Reserved if *self == Self::KERNEL_FAILED => {
                f.write_str("KERNEL_FAILED (the kernel failed)")
            }
            ReturnClass::Reserved => write!(f, "reserved code {:#04x}", self.0),
            ReturnClass::Application => write!(f, "application error {:#04x}", self.0),
            ReturnClass::Undefined => write!(f, "undefined code {:#x}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Function code 5 with user bytes 0x11 0x22 0x33, as the wire carries it (big-endian).
    static CALL: [u8; 4] = [0x33, 0x22, 0x11, 0x85];
    /// Return code 0x12 (an application error), low byte 0.
    static REPLY: [u8; 4] = [0x00, 0x00, 0x12, 0x00];

    #[test]
    fn test_request_construct_and_parse() {
        let code = FunctionCode::new(5).map(|c| encode_request(c, [0x11, 0x22, 0x33]));
        assert_eq!(code.map(u32::to_be_bytes), Some(CALL));
        assert_eq!(
            Request::decode(u32::from_be_bytes(CALL)),
            Request::Call {
                fncode: 5,
                user: [0x11, 0x22, 0x33]
            }
        );
        assert_eq!(Request::decode(0), Request::ClientError);
        assert_eq!(Request::user_word([0x11, 0x22, 0x33]), 0x3322_1100);
    }

    #[test]
    fn test_reply_construct_and_parse() {
        let rc = ReturnCode::application(0x12);
        assert_eq!(rc.map(|rc| rc.to_imm().to_be_bytes()), Some(REPLY));
        // The low byte is ignored.
        let mut bytes = REPLY;
        bytes[3] = 0xFF;
        assert_eq!(Some(ReturnCode::from_imm(u32::from_be_bytes(bytes))), rc);
        assert_eq!(
            ReturnCode::KERNEL_FAILED.to_imm().to_be_bytes(),
            [0, 0, 3, 0]
        );
        assert_eq!(ReturnCode::KERNEL_FAILED.class(), ReturnClass::Reserved);
        assert_eq!(
            std::format!("{}", ReturnCode::KERNEL_FAILED),
            "KERNEL_FAILED (the kernel failed)"
        );
        assert_eq!(
            std::format!("{}", ReturnCode::new(0x04).unwrap()),
            "reserved code 0x04"
        );
        assert_eq!(ReturnCode::new(0x0100_0000), None);
    }
}
