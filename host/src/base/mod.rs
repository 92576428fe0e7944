//! The floor every other layer stands on: buffers a transport may read and write like a NIC
//! ([`memory`]), sizes and durations as people write them ([`units`]), the protocol clock and
//! the log-line throttle (crate-internal). Nothing here imports a module above it.

pub(crate) mod clock;
#[allow(unsafe_code)]
pub mod memory;
pub(crate) mod throttle;
pub mod units;
