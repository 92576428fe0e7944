//! Protocol constants and capacities.

/// Most regions (parameter + internal) a connection can declare: the FPGA's limit and the
/// capacity of every table in this crate.
pub const MAX_REGIONS: usize = crate::wire::mrsp::MAX_RECORDS;

/// Most MRSP records a C peer can handle (spec §2.8, defect D-03): 31.
pub const MAX_RECORDS_C_PEER: u8 = 31;

/// Size of the MRSP receive buffer the C reference posts (spec §2.8).
pub const C_MRSP_BUFFER_LEN: usize = 768;

/// Receive-buffer length that holds every MRSP message this crate accepts:
/// an Advertisement+Request with [`MAX_REGIONS`] records (4 + 32 · 24 = 772 bytes).
pub const MRSP_RECV_LEN: usize = crate::wire::mrsp::MAX_MESSAGE_LEN;

/// NAA page size used by the requested-address layout (spec §2.5).
pub const NAA_PAGE: u64 = 4096;

/// Largest requested NAA address plus one: the field is 56 bits wide (spec §2.3).
pub const NAA_ADDR_LIMIT: u64 = crate::wire::mrsp::ADDR_LIMIT;

/// Largest region an NAA accepts: 1 GiB, the NIC's maximum message size and the design's limit
/// per region (spec §2.8). Larger requests are refused with MRSP error 0x01.
pub const MAX_REGION_BYTES: u32 = 1 << 30;
