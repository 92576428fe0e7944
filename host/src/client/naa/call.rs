//! Per-call arguments of an RPC: function code, the three immediate user bytes (spec §3.2)
//! and a deadline, chosen per [`Naa::invoke_with`].

use std::time::Duration;

use naaice_core::FunctionCode;

use super::Naa;
use crate::error::{Error, Result};
use crate::transport::Endpoint;

/// The arguments of one RPC beyond its parameter buffers ([`Naa::invoke_with`]).
///
/// ```
/// use naaice::client::naa::Call;
/// let call = Call::new().function(7)?.user_bytes([1, 2, 3])
///     .timeout(std::time::Duration::from_secs(2));
/// # Ok::<(), naaice::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Call {
    fncode: Option<FunctionCode>,
    user: [u8; 3],
    timeout: Option<Duration>,
}

impl Call {
    /// The handle's function code, user bytes 0, the handle's RPC deadline: what
    /// [`Naa::invoke`] sends.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs function `code` (1..=127) instead of the handle's. The NAA answers a code it has
    /// no kernel for with SOCKET_UNAVAIL; the protocol does not tell the client which codes
    /// an NAA serves.
    pub fn function(mut self, code: u32) -> Result<Self> {
        self.fncode = Some(function_code(code)?);
        Ok(self)
    }

    /// The three user bytes of the request immediate (`user[0]` = bits 15..8); the kernel
    /// reads them (`KernelContext::user_bytes` in the software NAA).
    pub fn user_bytes(mut self, user: [u8; 3]) -> Self {
        self.user = user;
        self
    }

    /// The RPC's deadline, from the invoke: writes, kernel and reply must finish within it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The function code, if one was chosen.
    pub fn fncode(&self) -> Option<FunctionCode> {
        self.fncode
    }
}

/// `code` as a function code, if it is in 1..=127 (the immediate's 7 bits; 0 is the
/// client-error signal, spec §3.5).
pub(super) fn function_code(code: u32) -> Result<FunctionCode> {
    u8::try_from(code)
        .ok()
        .and_then(FunctionCode::new)
        .ok_or_else(|| Error::InvalidArgument(format!("function code {code} is not in 1..=127")))
}

impl<E: Endpoint> Naa<E> {
    /// Starts one RPC with per-call arguments and returns at once; complete it with
    /// [`Naa::test`] / [`Naa::wait`] as usual. The full 24-bit return code is
    /// [`Status::naa_error`](super::Status::naa_error). After [`Naa::cancel`] it reconnects
    /// first (blocking, within the connect and MRSP deadlines).
    pub fn invoke_with(&mut self, call: &Call) -> Result<()> {
        if self.is_busy() {
            return Err(Error::Busy);
        }
        let fncode = call.fncode.unwrap_or(self.fncode);
        let timeout = call.timeout.unwrap_or_else(|| self.rpc_timeout());
        let conn = match &mut self.conn {
            Some(conn) => conn,
            None => self.conn.insert(self.link.reconnect(&mut self.stats)?),
        };
        let (sent, received) = self.link.bytes(conn.rpc_count() == 0);
        conn.init_transfer_with(fncode, call.user, timeout)?;
        self.stats.started(sent, received);
        Ok(())
    }
}
