//! Kernels written in C: the `naa_swnaa_kernel` signature of `naaice_ap2.h`, as the C API's
//! `naa_swnaa_register_kernel` and the kernel plugins of `naaice-swnaa --kernel` call them.
//!
//! The structures here have the layout of the header's `naa_swnaa_call` and
//! `naa_swnaa_region` (checked by the C API's tests against the generated header).

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

use naaice_core::ReturnCode;

use super::kernel::{KERNEL_FAILED, Kernel, KernelContext};

/// The RPC a C kernel runs for (`naa_swnaa_call`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CKernelCall {
    /// Function code (1-127).
    pub fncode: u8,
    /// The three user bytes of the client's immediate.
    pub user_bytes: [u8; 3],
    /// 1-based RPC number on this connection.
    pub rpc: u32,
}

/// One region as a C kernel sees it (`naa_swnaa_region`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CKernelRegion {
    /// Start of the region's memory (valid for the kernel's run only).
    pub addr: *mut c_void,
    /// Length in bytes.
    pub size: usize,
    /// `NAA_REGION_*` flags the client announced.
    pub flags: u8,
}

/// A C kernel function (`naa_swnaa_kernel`): computes on `regions[0..n_regions]` and returns
/// the RPC's return code (0, or an application code up to 0xFFFFFF; larger values are sent
/// as KERNEL_FAILED).
pub type CKernelFn = unsafe extern "C" fn(
    user_data: *mut c_void,
    call: *const CKernelCall,
    regions: *mut CKernelRegion,
    n_regions: usize,
) -> u32;

/// A C kernel with its user data, as a [`Kernel`].
pub struct CKernel {
    run: CKernelFn,
    user_data: UserData,
    /// What must outlive the function (the shared library it came from).
    _owner: Option<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for CKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CKernel")
            .field("run", &(self.run as *const c_void))
            .finish_non_exhaustive()
    }
}

impl CKernel {
    /// The kernel `run`, called with `user_data`; `owner` is kept alive as long as the
    /// kernel (the library `run` lives in).
    ///
    /// # Safety
    ///
    /// `run` must be callable with the `naa_swnaa_kernel` contract: it may read and write
    /// only the regions it is given, for the call only, and may be called from several
    /// threads at once with the same `user_data` (the NAA serves each connection on its own
    /// thread), so it and `user_data` must be thread-safe. Both must stay valid while the
    /// kernel exists (`owner` may hold what keeps them so).
    pub unsafe fn new(
        run: CKernelFn,
        user_data: *mut c_void,
        owner: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Self {
        Self {
            run,
            user_data: UserData(user_data),
            _owner: owner,
        }
    }
}

/// The C side's `user_data` pointer, passed back to its kernel.
struct UserData(*mut c_void);

// SAFETY: the pointer is never dereferenced here, only handed back to the C kernel, whose
// creator promised (`CKernel::new`) that sharing it across threads is sound.
unsafe impl Send for UserData {}
// SAFETY: see `Send`.
unsafe impl Sync for UserData {}

impl Kernel for CKernel {
    fn run(&self, ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
        let call = CKernelCall {
            fncode: ctx.fncode(),
            user_bytes: ctx.user_bytes(),
            rpc: ctx.rpc(),
        };
        let mut regions: heapless::Vec<CKernelRegion, { naaice_core::config::MAX_REGIONS }> = ctx
            .regions()
            .iter_mut()
            .map(|r| CKernelRegion {
                addr: r.data.as_mut_ptr().cast(),
                size: r.data.len(),
                flags: r.flags.bits(),
            })
            .collect();
        // SAFETY: `run` has the kernel signature (`CKernel::new`'s contract). `call` and
        // `regions` are valid for the call; each region pointer comes from an exclusive
        // guard of the region's buffer (held by `ctx` until the kernel returns), valid for
        // `size` bytes of reads and writes.
        let rc =
            unsafe { (self.run)(self.user_data.0, &call, regions.as_mut_ptr(), regions.len()) };
        ReturnCode::new(rc).unwrap_or_else(|| {
            tracing::warn!(
                fncode = call.fncode,
                "kernel returned {rc:#x}, over 24 bits; sending 0x03"
            );
            KERNEL_FAILED
        })
    }
}
