//! The C types and constants of the low-level API (AP1), shared with the middleware API:
//! `naaice.h`, which `naaice_ap2.h` includes like the reference's does (spec section 7).

use naaice::core::Phase;

/// Most memory regions of one connection: parameters plus internal regions (spec section 2.8).
pub const MAX_MRS: u32 = 32;

/// Bit position of the NAA's return code in its reply immediate (spec section 3.7).
pub const IMMEDIATE_OFFSET: u32 = 8;

/// Default deadline of a blocking call (MRSP, RPC) in seconds, as in the reference.
pub const DEFAULT_TIMEOUT: u32 = 3600;

/// The port NAAs listen on unless told otherwise, as in the reference (its programs pass it to
/// `naaice_init_communication_context`; an `NAA_SPEC` entry with an empty port means it too).
pub const SERVER_CONNECTION_PORT: u16 = 12345;

/// The rdma_cm `retry_count` of the verbs transport's connections, as in the reference.
pub const DEFAULT_RETRY_COUNT: u32 = 7;

/// Region flags of the MRSP request (spec section 2.4).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)]
pub enum naaice_mrflags_value {
    /// NAA-only scratch memory, never transferred.
    MRFLAG_INTERNAL = 0x01,
    /// An input written with the first RPC only.
    MRFLAG_SINGLESEND = 0x02,
    /// Written to the NAA with every RPC.
    MRFLAG_INPUT = 0x04,
    /// Written back by the NAA after every RPC.
    MRFLAG_OUTPUT = 0x08,
}

/// A connection's context (AP1 `naaice_init_communication_context`, AP2 `naa_handle.comm_ctx`).
/// Opaque: the pointer is an identifier into the library's table, never dereferenced, so a
/// stale or forged context is refused instead of being used.
pub struct naaice_communication_context {
    _private: [u8; 0],
}

/// Communication states (spec section 4.1); the values are compared numerically.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::upper_case_acronyms)]
pub enum naaice_communication_state {
    /// Created.
    INIT = 0,
    /// Address resolved.
    READY = 1,
    /// Connection established.
    CONNECTED = 2,
    /// Disconnected.
    DISCONNECTED = 3,
    /// MRSP message sent, waiting for its completion.
    MRSP_SENDING = 10,
    /// Waiting for the NAA's MRSP answer.
    MRSP_RECEIVING = 11,
    /// MRSP done: ready for RPCs.
    MRSP_DONE = 12,
    /// RPC inputs being written.
    DATA_SENDING = 20,
    /// The NAA computes (server side).
    CALCULATING = 21,
    /// Waiting for the NAA's results.
    DATA_RECEIVING = 22,
    /// The RPC finished.
    FINISHED = 30,
    /// The connection failed.
    ERROR = 40,
}

impl From<Phase> for naaice_communication_state {
    fn from(p: Phase) -> Self {
        match p {
            Phase::Init => Self::INIT,
            Phase::Ready => Self::READY,
            Phase::Connected => Self::CONNECTED,
            Phase::Disconnected => Self::DISCONNECTED,
            Phase::MrspSending => Self::MRSP_SENDING,
            Phase::MrspReceiving => Self::MRSP_RECEIVING,
            Phase::MrspDone => Self::MRSP_DONE,
            Phase::DataSending => Self::DATA_SENDING,
            Phase::Calculating => Self::CALCULATING,
            Phase::DataReceiving => Self::DATA_RECEIVING,
            Phase::Finished => Self::FINISHED,
            Phase::Error => Self::ERROR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_are_the_wire_values() {
        use naaice::core::RegionFlags;
        assert_eq!(
            naaice_mrflags_value::MRFLAG_INTERNAL as u8,
            RegionFlags::INTERNAL.bits()
        );
        assert_eq!(
            naaice_mrflags_value::MRFLAG_SINGLESEND as u8,
            RegionFlags::SINGLESEND.bits()
        );
        assert_eq!(
            naaice_mrflags_value::MRFLAG_INPUT as u8,
            RegionFlags::INPUT.bits()
        );
        assert_eq!(
            naaice_mrflags_value::MRFLAG_OUTPUT as u8,
            RegionFlags::OUTPUT.bits()
        );
        assert_eq!(MAX_MRS as usize, naaice::core::config::MAX_REGIONS);
        assert_eq!(SERVER_CONNECTION_PORT, naaice::transport::DEFAULT_PORT);
    }
}
