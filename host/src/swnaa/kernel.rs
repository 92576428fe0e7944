//! Kernels of the software NAA: what runs for a function code.

use std::sync::Arc;
use std::time::Instant;

use naaice_core::machine::KernelCall;
use naaice_core::{FunctionCode, RegionFlags, ReturnCode};

use crate::memory::BufferGuard;

/// Return code the software NAA sends when a kernel panics: core's
/// [`ReturnCode::KERNEL_FAILED`], shared with the firmware.
pub const KERNEL_FAILED: ReturnCode = ReturnCode::KERNEL_FAILED;

/// One region as a kernel sees it.
#[derive(Debug)]
pub struct KernelRegion<'a> {
    /// Flags the client announced (INTERNAL, SINGLESEND, INPUT, OUTPUT).
    pub flags: RegionFlags,
    /// The NAA-side memory, exclusively borrowed for the kernel's run.
    pub data: BufferGuard<'a>,
}

impl KernelRegion<'_> {
    /// True for NAA-only scratch memory.
    pub fn is_internal(&self) -> bool {
        self.flags.contains(RegionFlags::INTERNAL)
    }
}

/// What a kernel gets: the call (function code, user bytes, RPC number) and the regions.
#[derive(Debug)]
pub struct KernelContext<'r, 'a> {
    call: KernelCall,
    regions: &'r mut [KernelRegion<'a>],
    deadline: Instant,
}

impl<'r, 'a> KernelContext<'r, 'a> {
    pub(crate) fn new(
        call: KernelCall,
        regions: &'r mut [KernelRegion<'a>],
        deadline: Instant,
    ) -> Self {
        Self {
            call,
            regions,
            deadline,
        }
    }

    /// When the kernel timeout passes. A kernel still running then has its RPC answered with
    /// KERNEL_TIMEOUT when it returns (its outputs are not sent), so long kernels should
    /// check [`KernelContext::timed_out`] and stop early.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// True once the kernel timeout has passed: whatever the kernel returns now, the RPC is
    /// answered with KERNEL_TIMEOUT.
    pub fn timed_out(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Function code of the RPC.
    pub fn fncode(&self) -> u8 {
        self.call.fncode
    }

    /// The three user bytes of the client's immediate.
    pub fn user_bytes(&self) -> [u8; 3] {
        self.call.user
    }

    /// 1-based RPC number on this connection.
    pub fn rpc(&self) -> u32 {
        self.call.rpc
    }

    /// All regions in request order (parameters, then internal).
    pub fn regions(&mut self) -> &mut [KernelRegion<'a>] {
        self.regions
    }

    /// Parameter region `index` (the client's parameter order).
    pub fn param(&mut self, index: usize) -> Option<&mut [u8]> {
        self.regions
            .iter_mut()
            .filter(|r| !r.is_internal())
            .nth(index)
            .map(|r| &mut *r.data)
    }

    /// Internal region `index`.
    pub fn internal(&mut self, index: usize) -> Option<&mut [u8]> {
        self.regions
            .iter_mut()
            .filter(|r| r.is_internal())
            .nth(index)
            .map(|r| &mut *r.data)
    }

    /// Number of parameter regions.
    pub fn param_count(&self) -> usize {
        self.regions.iter().filter(|r| !r.is_internal()).count()
    }
}

/// A kernel: computes on the regions and returns the RPC's return code.
///
/// Closures `Fn(&mut KernelContext) -> ReturnCode` are kernels.
pub trait Kernel: Send + Sync {
    /// Runs the kernel.
    fn run(&self, ctx: &mut KernelContext<'_, '_>) -> ReturnCode;
}

impl<F> Kernel for F
where
    F: Fn(&mut KernelContext<'_, '_>) -> ReturnCode + Send + Sync,
{
    fn run(&self, ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
        self(ctx)
    }
}

/// Kernels by function code. Users add their own without touching the library.
#[derive(Clone)]
pub struct KernelRegistry {
    kernels: Vec<Option<Arc<dyn Kernel>>>,
}

impl std::fmt::Debug for KernelRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let codes: Vec<usize> = self
            .kernels
            .iter()
            .enumerate()
            .filter(|(_, k)| k.is_some())
            .map(|(i, _)| i)
            .collect();
        f.debug_struct("KernelRegistry")
            .field("codes", &codes)
            .finish()
    }
}

impl Default for KernelRegistry {
    fn default() -> Self {
        Self::builtin()
    }
}

/// Adds `n` (mod 256) to every byte of every parameter region.
fn add_to_params(ctx: &mut KernelContext<'_, '_>, n: u8) {
    for r in ctx.regions().iter_mut().filter(|r| !r.is_internal()) {
        for b in r.data.iter_mut() {
            *b = b.wrapping_add(n);
        }
    }
}

impl KernelRegistry {
    /// No kernels.
    pub fn empty() -> Self {
        Self {
            kernels: vec![None; 128],
        }
    }

    /// The reference's built-ins (spec §5.3): 1 adds 1 to every byte of every parameter
    /// region, 2 adds 2, 3 does nothing.
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        const fn code(c: u8) -> FunctionCode {
            match FunctionCode::new(c) {
                Some(code) => code,
                None => panic!("built-in function codes are 1..=127"),
            }
        }
        const ONE: FunctionCode = code(1);
        const TWO: FunctionCode = code(2);
        const THREE: FunctionCode = code(3);
        r.register(ONE, |ctx: &mut KernelContext<'_, '_>| {
            add_to_params(ctx, 1);
            ReturnCode::SUCCESS
        });
        r.register(TWO, |ctx: &mut KernelContext<'_, '_>| {
            add_to_params(ctx, 2);
            ReturnCode::SUCCESS
        });
        r.register(THREE, |_: &mut KernelContext<'_, '_>| ReturnCode::SUCCESS);
        r
    }

    /// Registers (or replaces) the kernel for `code`; returns the previous one.
    pub fn register(
        &mut self,
        code: FunctionCode,
        kernel: impl Kernel + 'static,
    ) -> Option<Arc<dyn Kernel>> {
        self.kernels[usize::from(code.get())].replace(Arc::new(kernel))
    }

    /// Removes the kernel for `code`.
    pub fn remove(&mut self, code: FunctionCode) -> Option<Arc<dyn Kernel>> {
        self.kernels[usize::from(code.get())].take()
    }

    /// The kernel for a 7-bit function code.
    pub fn get(&self, fncode: u8) -> Option<&Arc<dyn Kernel>> {
        self.kernels.get(usize::from(fncode))?.as_ref()
    }

    /// The function codes with a kernel, for the protocol machine.
    pub fn codes(&self) -> naaice_core::machine::KernelSet {
        let mut set = naaice_core::machine::KernelSet::empty();
        for (i, k) in self.kernels.iter().enumerate() {
            if let (Some(_), Some(code)) = (k, u8::try_from(i).ok().and_then(FunctionCode::new)) {
                set.insert(code);
            }
        }
        set
    }
}
