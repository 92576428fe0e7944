//! Firmware settings: the board's memory map, limits, kernels and timeouts.

use core::time::Duration;

use naaice_core::config::MAX_REGIONS;
use naaice_core::{KernelSet, Placement, ServerConfig};

use crate::memory_map::MemoryMap;

/// Firmware settings. The connection limit is the `N` of [`crate::Firmware`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FirmwareConfig {
    /// NAA memory that regions may occupy (the FPGA places every region at the client's
    /// requested address inside it).
    pub memory: MemoryMap,
    /// Most regions per connection (≤ 32); more are refused with MRSP error 0x03.
    pub max_regions: u8,
    /// Function codes with a kernel; others are answered with SOCKET_UNAVAIL.
    pub kernels: KernelSet,
    /// Kernel run time limit; past it the RPC is answered with KERNEL_TIMEOUT.
    pub kernel_timeout: Duration,
    /// From the connection request until the MRSP is done.
    pub mrsp_timeout: Duration,
    /// How long the engine may take to complete the firmware's SENDs and WRITEs.
    pub completion_timeout: Duration,
    /// How long a connection may sit idle between RPCs (`None`: forever).
    pub idle_timeout: Option<Duration>,
    /// Longest sleep of the main loop when nothing is due (events are polled at least this
    /// often).
    pub poll_interval: Duration,
}

impl FirmwareConfig {
    /// Defaults for `memory` and `kernels`: 32 regions, kernel timeout 10 s, MRSP and
    /// completion timeouts 10 s, no idle limit, 100 µs poll interval.
    pub const fn new(memory: MemoryMap, kernels: KernelSet) -> Self {
        Self {
            memory,
            max_regions: MAX_REGIONS as u8,
            kernels,
            kernel_timeout: Duration::from_secs(10),
            mrsp_timeout: Duration::from_secs(10),
            completion_timeout: Duration::from_secs(10),
            idle_timeout: None,
            poll_interval: Duration::from_micros(100),
        }
    }

    /// The configuration of each connection's protocol machine: the FPGA mode
    /// ([`Placement::Requested`]) over the memory map.
    pub const fn server(&self) -> ServerConfig {
        let mut c = ServerConfig::new(self.kernels);
        c.max_regions = self.max_regions;
        c.max_total_bytes = self.memory.len;
        c.placement = Placement::Requested {
            base: self.memory.base,
            len: self.memory.len,
        };
        c.mrsp_timeout = self.mrsp_timeout;
        c.kernel_timeout = self.kernel_timeout;
        c.completion_timeout = self.completion_timeout;
        c.idle_timeout = self.idle_timeout;
        c
    }
}
