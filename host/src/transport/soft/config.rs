//! [`SoftConfig`]: what a user of the software transport may tune (timeouts, queue sizes, and
//! faults to inject in tests).

use std::time::Duration;

use super::engine::Settings;
#[cfg(feature = "fault-injection")]
use super::fault::FaultPlan;

/// Settings of the software transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoftConfig {
    /// How long an initiator waits for the acknowledgement of a transmitted request while the
    /// peer sends nothing at all (or for a write to the socket to make progress) before the
    /// request fails with `RetryExceeded` and the connection is torn down (like the RC local
    /// ACK timeout times `retry_count`). Default 4 s.
    pub ack_timeout: Duration,
    /// How long a responder waits for a posted receive before refusing a SEND or WRITE WITH
    /// IMM with `RnrRetryExceeded` (like `rnr_retry_count`). Default 1 s.
    pub rnr_timeout: Duration,
    /// Upper bound for connection setup: the client's handshake (also limited by the deadline
    /// given to `connect`), and how long a listener waits for a connected client's HELLO.
    /// Default 10 s.
    pub connect_timeout: Duration,
    /// How long a responder holds back a due ACK, so that a reply the application posts
    /// meanwhile carries it (zero: acknowledge at once). Default 200 µs.
    pub ack_delay: Duration,
    /// Most outstanding send-queue work requests. Default 1025.
    pub max_send_wr: usize,
    /// Most outstanding receives. Default 1025.
    pub max_recv_wr: usize,
    /// Faults to inject, for tests of deadlines and error paths (cargo feature
    /// `fault-injection`). Default: none.
    #[cfg(feature = "fault-injection")]
    pub faults: FaultPlan,
}

impl Default for SoftConfig {
    fn default() -> Self {
        Self {
            ack_timeout: Duration::from_secs(4),
            rnr_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(10),
            ack_delay: Duration::from_micros(200),
            max_send_wr: 1025,
            max_recv_wr: 1025,
            #[cfg(feature = "fault-injection")]
            faults: FaultPlan::default(),
        }
    }
}

impl SoftConfig {
    /// The configuration with out-of-range values raised to their minimum.
    pub(crate) fn sanitized(mut self) -> Self {
        let ms = Duration::from_millis(1);
        self.ack_timeout = self.ack_timeout.max(ms);
        self.connect_timeout = self.connect_timeout.max(ms);
        self.max_send_wr = self.max_send_wr.max(1);
        self.max_recv_wr = self.max_recv_wr.max(1);
        self
    }

    /// The engine's share of the settings.
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            ack_timeout: self.ack_timeout,
            rnr_timeout: self.rnr_timeout,
            ack_delay: self.ack_delay,
            max_send_wr: self.max_send_wr,
            max_recv_wr: self.max_recv_wr,
            #[cfg(feature = "fault-injection")]
            faults: self.faults.clone(),
        }
    }
}
