//! Proof of overlap without timing: NAAs whose kernels wait at one rendezvous that opens only
//! when all of them have started. RPCs that ran one after the other would never get there;
//! the kernel then returns [`RENDEZVOUS_MISSED`] after a generous timeout (a failure, not a
//! hang).

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaaConfig, SoftNaaHandle};
use naaice::{Naa, NaaOptions, Param};
use naaice_core::ReturnCode;

use crate::code;
use crate::site::Site;

/// Function code of the first fleet NAA's kernel; NAA `i` serves `FIRST_CODE + i`.
pub const FIRST_CODE: u8 = 40;
/// Application return code of a kernel whose rendezvous did not open in time.
pub const RENDEZVOUS_MISSED: u8 = 0x55;
/// How long a kernel waits for the others.
pub const RENDEZVOUS_TIMEOUT: Duration = Duration::from_secs(20);

/// A barrier of `n` with a timeout, reusable round after round.
#[derive(Debug)]
pub struct Rendezvous {
    n: usize,
    arrived: Mutex<usize>,
    cv: Condvar,
}

impl Rendezvous {
    /// A rendezvous of `n` parties.
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(Self {
            n,
            arrived: Mutex::new(0),
            cv: Condvar::new(),
        })
    }

    /// Arrives and waits until `n` parties of this round arrived; false after `timeout`.
    pub fn arrive(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        let mut arrived = self.arrived.lock().unwrap_or_else(|p| p.into_inner());
        *arrived += 1;
        let round_end = (*arrived).div_ceil(self.n) * self.n;
        self.cv.notify_all();
        while *arrived < round_end {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            arrived = self
                .cv
                .wait_timeout(arrived, until - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

/// `n` software NAAs at `site`; NAA `i` serves function code `FIRST_CODE + i` with a kernel
/// that adds 1 to every byte of its parameters and meets the others at `rendezvous`.
pub fn fleet(site: &Site, n: usize, rendezvous: &Arc<Rendezvous>) -> Vec<SoftNaaHandle> {
    (0..n)
        .map(|i| {
            let r = Arc::clone(rendezvous);
            let mut kernels = KernelRegistry::empty();
            kernels.register(
                code(FIRST_CODE + i as u8),
                move |ctx: &mut KernelContext<'_, '_>| {
                    for region in ctx.regions().iter_mut().filter(|r| !r.is_internal()) {
                        region.data.iter_mut().for_each(|b| *b = b.wrapping_add(1));
                    }
                    if r.arrive(RENDEZVOUS_TIMEOUT) {
                        ReturnCode::SUCCESS
                    } else {
                        ReturnCode::application(RENDEZVOUS_MISSED).unwrap_or(ReturnCode::SUCCESS)
                    }
                },
            );
            let config = SoftNaaConfig {
                kernel_timeout: RENDEZVOUS_TIMEOUT * 2,
                wait: site.wait,
                ..SoftNaaConfig::default()
            };
            site.start_naa_with(config, kernels)
        })
        .collect()
}

/// One handle per fleet NAA (an in-place parameter of `len` bytes holding `i`).
pub fn handles(site: &Site, fleet: &[SoftNaaHandle], len: usize) -> Vec<Naa> {
    fleet
        .iter()
        .enumerate()
        .map(|(i, naa)| {
            let buffer = naaice::Buffer::from_vec(vec![i as u8; len]);
            let options = NaaOptions {
                rpc_timeout: RENDEZVOUS_TIMEOUT * 2,
                ..NaaOptions::at(naa.local_addr())
            };
            Naa::create_with(
                &site.transport,
                u32::from(FIRST_CODE) + i as u32,
                vec![Param::new(buffer.clone())],
                vec![Param::new(buffer)],
                &options,
            )
            .expect("connect to a fleet NAA")
        })
        .collect()
}
