//! The kernel seam: the accelerator kernels next to the soft-core.
//!
//! The firmware loads a job into the [`KernelUnit`] (function code, user bytes and the
//! connection's region addresses), then pulses the unit's start line (an
//! `embedded_hal::digital::OutputPin`). When a kernel finishes, the unit raises an interrupt;
//! the interrupt handler reads the status and records it with [`KernelDone::signal`]. The main
//! loop picks it up with [`KernelDone::take`]. [`KernelDone`] is the only state shared with
//! interrupt handlers and lives behind a `critical-section` mutex.

use core::cell::RefCell;

use critical_section::Mutex;
use naaice_core::region::ServedRegion;

/// What a kernel is started with.
#[derive(Clone, Copy, Debug)]
pub struct KernelJob<'a> {
    /// Function code (1..=127, one the firmware has a kernel for).
    pub fncode: u8,
    /// The immediate's three user bytes.
    pub user: [u8; 3],
    /// 1-based RPC counter of the connection.
    pub rpc: u32,
    /// The connection's regions (parameters in request order, then internal ones), each with
    /// its NAA address in `local`.
    pub regions: &'a [ServedRegion],
}

/// The kernel hardware (see the [module](self) documentation).
pub trait KernelUnit {
    /// Loads `job` as the next kernel of connection slot `slot`; the start pulse follows.
    fn load(&mut self, slot: u8, job: &KernelJob<'_>);
    /// Stops the kernel of `slot` (timed out, or its connection went away). After this the
    /// unit raises no completion for it.
    fn abort(&mut self, slot: u8);
}

/// Kernel completions recorded by the interrupt handler, one per connection slot (`N ≤ 32`).
#[derive(Debug)]
pub struct KernelDone<const N: usize> {
    status: Mutex<RefCell<[Option<u32>; N]>>,
}

impl<const N: usize> KernelDone<N> {
    /// No completions (usable in a `static`).
    pub const fn new() -> Self {
        Self {
            status: Mutex::new(RefCell::new([None; N])),
        }
    }

    /// Records that the kernel of `slot` finished with `status` (called from the interrupt
    /// handler). An out-of-range slot is ignored.
    pub fn signal(&self, slot: u8, status: u32) {
        critical_section::with(|cs| {
            if let Some(s) = self.status.borrow_ref_mut(cs).get_mut(usize::from(slot)) {
                *s = Some(status);
            }
        });
    }

    /// Takes the recorded status of `slot`, if any.
    pub fn take(&self, slot: u8) -> Option<u32> {
        critical_section::with(|cs| {
            self.status
                .borrow_ref_mut(cs)
                .get_mut(usize::from(slot))
                .and_then(Option::take)
        })
    }
}

impl<const N: usize> Default for KernelDone<N> {
    fn default() -> Self {
        Self::new()
    }
}
