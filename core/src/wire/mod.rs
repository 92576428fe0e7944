//! Wire formats: MRSP messages ([`mrsp`]) and RDMA immediates ([`imm`]).
//!
//! # Panic contract
//! Nothing in this module panics, whatever the input:
//! * [`mrsp::Packet::new_checked`] validates the header, the record count and the length;
//!   after it succeeds no accessor panics.
//! * [`mrsp::Repr::parse`] additionally validates every flag byte and record; it accepts exactly
//!   the messages [`mrsp::Repr::emit`] can produce (plus ignored padding and trailing bytes).
//! * `emit` writes into a caller buffer and returns an error if it is shorter than
//!   `buffer_len()` or a field does not fit its wire width.

mod flags;
pub mod imm;
pub mod mrsp;

pub use flags::RegionFlags;
pub use imm::{FunctionCode, Request, ReturnClass, ReturnCode};
pub use mrsp::{
    AdvertRecord, MrspErrorCode, MsgType, Packet as MrspPacket, Repr as MrspRepr, RequestRecord,
};

/// Why a message could not be parsed or emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The buffer is shorter than the message needs.
    Truncated {
        /// Bytes the message needs.
        needed: usize,
        /// Bytes available.
        len: usize,
    },
    /// The type byte is not one this protocol defines.
    UnknownType(u8),
    /// Type 0x03 ("Request") is defined but never valid on the wire.
    ReservedType,
    /// An Error message carries a code other than 0x01–0x03.
    InvalidErrorCode(u8),
    /// More records than this implementation supports ([`mrsp::MAX_RECORDS`]).
    TooManyRecords(u8),
    /// A record's flag byte has unknown bits or an invalid combination.
    InvalidFlags {
        /// Record index.
        index: u8,
        /// The flag byte.
        flags: u8,
    },
    /// An internal-region record publishes a client address or rkey (must be 0).
    InvalidInternalRecord {
        /// Record index.
        index: u8,
    },
    /// A requested NAA address does not fit the 56-bit field.
    AddressTooLarge,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::Truncated { needed, len } => {
                write!(f, "message truncated: needs {needed} bytes, has {len}")
            }
            Self::UnknownType(t) => write!(f, "unknown MRSP message type {t:#04x}"),
            Self::ReservedType => f.write_str("reserved MRSP message type 0x03"),
            Self::InvalidErrorCode(c) => write!(f, "invalid MRSP error code {c:#04x}"),
            Self::TooManyRecords(n) => write!(
                f,
                "{n} MRSP records exceed the limit of {}",
                mrsp::MAX_RECORDS
            ),
            Self::InvalidFlags { index, flags } => {
                write!(f, "record {index}: invalid region flags {flags:#04x}")
            }
            Self::InvalidInternalRecord { index } => {
                write!(
                    f,
                    "record {index}: internal region with non-zero address or rkey"
                )
            }
            Self::AddressTooLarge => f.write_str("requested NAA address exceeds 56 bits"),
        }
    }
}

impl core::error::Error for Error {}

/// Result type of the wire layer.
pub type Result<T> = core::result::Result<T, Error>;
