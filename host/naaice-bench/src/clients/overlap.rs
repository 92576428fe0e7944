//! The middleware-level overlap case: one thread keeps an RPC in flight on each of many
//! handles and waits for whichever finishes first with `naaice::client::naa_set::wait_any`, invoking
//! that handle again at once.

use std::net::SocketAddr;
use std::time::Instant;

use naaice::Naa;
use naaice::client::naa_set::wait_any;
use naaice::transport::AnyTransport;

use crate::Error;
use crate::clients::client::{rust_handle, warm_up_count};
use crate::clients::result::ClientResult;

/// The handles of one thread.
pub(crate) struct Overlap {
    naas: Vec<Naa>,
    sizes: Vec<u64>,
}

impl Overlap {
    /// A handle per size, each connected to `target` and warmed up.
    pub(crate) fn connect(
        transport: &AnyTransport,
        target: SocketAddr,
        fncode: u8,
        sizes: &[u64],
    ) -> Result<Self, Error> {
        let mut naas = Vec::with_capacity(sizes.len());
        for &size in sizes {
            let mut naa = rust_handle(transport, target, fncode, size)?;
            for _ in 0..warm_up_count(size) {
                naa.invoke()?;
                naa.wait()?;
            }
            naas.push(naa);
        }
        Ok(Self {
            naas,
            sizes: sizes.to_vec(),
        })
    }

    /// Keeps every handle busy until `until`; a result per handle (its latencies from invoke
    /// to the `wait_any` that reported it).
    pub(crate) fn run(&mut self, until: Instant) -> Result<Vec<ClientResult>, Error> {
        let start = Instant::now();
        let mut results = Vec::with_capacity(self.naas.len());
        let mut invoked = Vec::with_capacity(self.naas.len());
        for (naa, &size) in self.naas.iter_mut().zip(&self.sizes) {
            results.push(ClientResult::empty(size)?);
            invoked.push(Instant::now());
            naa.invoke()?;
        }
        while let Some(done) = wait_any(&mut self.naas) {
            let now = Instant::now();
            let status = done.result?;
            if !status.naa_error.is_success() {
                return Err(format!("the NAA returned {}", status.naa_error).into());
            }
            let i = done.index;
            results[i].count(now - invoked[i], now - start)?;
            if now < until {
                invoked[i] = Instant::now();
                self.naas[i].invoke()?;
            }
        }
        Ok(results)
    }
}
