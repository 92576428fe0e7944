//! What every mode stands on: the transport and the NAA under test ([`setup`]), the raw
//! transport's limit ([`raw`]), sizes, statistics, CPU and process clocks, and the kinds the
//! command line chooses.

pub(crate) mod cpu;
pub(crate) mod kind;
pub(crate) mod process_clock;
pub(crate) mod raw;
pub(crate) mod setup;
pub(crate) mod sizes;
pub(crate) mod stats;
pub(crate) mod usage;
