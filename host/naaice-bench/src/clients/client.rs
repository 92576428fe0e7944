//! One client connection doing RPCs (or raw round trips) one at a time, and the handles the
//! clients use.

use std::net::SocketAddr;
use std::time::Duration;

use naaice::transport::AnyTransport;
use naaice::{Naa, NaaOptions, Param};

use crate::Error;
use crate::base::raw::Echo;
use crate::base::setup::retry;

/// Deadline of one RPC of a client (a stalled NAA ends the run with an error).
pub(crate) const RPC_TIMEOUT: Duration = Duration::from_secs(60);
/// Payload of the warm-up RPCs of each client before the measurement (at least 2 RPCs, at
/// most 20).
const WARM_UP_BYTES: u64 = 32 << 20;

/// One connection doing RPCs (or raw round trips), one at a time.
pub(crate) trait Client {
    /// One RPC, blocking until it is done.
    fn rpc(&mut self) -> Result<(), Error>;
}

/// An RPC through `naaice::Naa`.
pub(crate) struct RustClient(pub(crate) Naa);

impl Client for RustClient {
    fn rpc(&mut self) -> Result<(), Error> {
        self.0.invoke()?;
        let status = self.0.wait()?;
        if !status.naa_error.is_success() {
            return Err(format!("the NAA returned {}", status.naa_error).into());
        }
        Ok(())
    }
}

impl Client for Echo {
    fn rpc(&mut self) -> Result<(), Error> {
        self.round_trip().map(drop)
    }
}

/// A handle of `size` bytes in place, connected to `target`.
pub(crate) fn rust_handle(
    transport: &AnyTransport,
    target: SocketAddr,
    fncode: u8,
    size: u64,
) -> Result<Naa, Error> {
    let data = Param::from_vec((0..usize::try_from(size)?).map(|i| i as u8).collect());
    let mut options = NaaOptions::at(target);
    options.rpc_timeout = RPC_TIMEOUT;
    options.wait = crate::base::setup::wait();
    // A connection of the previous measurement may still hold an NAA's slot for a moment.
    retry(&format!("naa_create at {target}"), || {
        Naa::create_with(
            transport,
            u32::from(fncode),
            vec![data.clone()],
            vec![data.clone()],
            &options,
        )
    })
    .map_err(|e| with_hint(e.to_string()))
}

/// `e`, and what to do if the NAA refused the connection for its connection limit.
pub(crate) fn with_hint(e: String) -> Error {
    if e.contains("overloaded") || e.contains("connection limit") {
        format!(
            "{e} (with --clients N the NAA must take N connections at once: start \
             naaice-swnaa with --max-connections N)"
        )
        .into()
    } else {
        e.into()
    }
}

/// Warm-up RPCs for `size`.
pub(crate) fn warm_up_count(size: u64) -> u64 {
    (WARM_UP_BYTES / size.max(1)).clamp(2, 20)
}
