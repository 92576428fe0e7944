//! The device context of a connection (owned by its rdma_cm id) and its protection domain;
//! the device list.

use std::ffi::CStr;
use std::ptr::NonNull;
use std::sync::Arc;

use super::sys::{
    ibv_alloc_pd, ibv_context, ibv_dealloc_pd, ibv_free_device_list, ibv_get_device_list,
    ibv_get_device_name, ibv_pd,
};

use super::cm::CmId;
use super::{Result, TransportError, os_error};

/// A protection domain on the device an rdma_cm id is bound to. Holds the id, which owns the
/// device context.
#[derive(Debug)]
pub(super) struct ProtectionDomain {
    raw: NonNull<ibv_pd>,
    id: Arc<CmId>,
}

// SAFETY: libibverbs objects are thread-safe; the PD is deallocated once in `Drop`, after every
// MR and QP on it (they hold an `Arc` to it).
unsafe impl Send for ProtectionDomain {}
// SAFETY: as above.
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    /// Allocates a PD on the device `id` is bound to (after address resolution, or on the id
    /// of a connection request).
    pub(super) fn new(id: &Arc<CmId>) -> Result<Arc<Self>> {
        let context = device_context(id)?;
        // SAFETY: `context` is the live device context of the id.
        let raw = unsafe { ibv_alloc_pd(context.as_ptr()) };
        let raw = NonNull::new(raw).ok_or_else(|| os_error("ibv_alloc_pd"))?;
        Ok(Arc::new(Self {
            raw,
            id: Arc::clone(id),
        }))
    }

    /// The raw PD.
    pub(super) fn as_ptr(&self) -> *mut ibv_pd {
        self.raw.as_ptr()
    }

    /// The device context (owned by the id this PD holds).
    pub(super) fn context(&self) -> Result<NonNull<ibv_context>> {
        device_context(&self.id)
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: allocated by `ibv_alloc_pd`, deallocated once; MRs and QPs on it are gone.
        let rc = unsafe { ibv_dealloc_pd(self.raw.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_dealloc_pd failed");
        }
    }
}

/// The device context an id is bound to.
fn device_context(id: &CmId) -> Result<NonNull<ibv_context>> {
    // SAFETY: the id is live; `verbs` is set by address resolution / connection requests.
    let verbs = unsafe { (*id.as_ptr()).verbs };
    NonNull::new(verbs).ok_or_else(|| {
        TransportError::Unavailable("the rdma_cm id is not bound to an RDMA device".into())
    })
}

/// The names of the RDMA devices (empty if there are none).
pub(super) fn device_names() -> Result<Vec<String>> {
    let mut n = 0;
    // SAFETY: `n` is a valid out-pointer; the list is freed below.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        let e = std::io::Error::last_os_error();
        // Without the uverbs kernel support the list cannot even be built: no devices.
        return match e.raw_os_error() {
            Some(libc::ENOSYS) | Some(libc::ENODEV) | Some(libc::ENOENT) => Ok(Vec::new()),
            _ => Err(TransportError::Io {
                call: "ibv_get_device_list",
                source: e,
            }),
        };
    }
    let count = usize::try_from(n).unwrap_or(0);
    let mut names = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: the list holds `n` valid device pointers.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        // SAFETY: `dev` is a live device of the list; the name is a C string owned by it.
        let name = unsafe { ibv_get_device_name(dev) };
        if !name.is_null() {
            // SAFETY: non-null NUL-terminated string valid while the list lives.
            names.push(
                unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    // SAFETY: the list came from `ibv_get_device_list` and is freed once.
    unsafe { ibv_free_device_list(list) };
    Ok(names)
}
