//! Owned verbs objects for the smoke tests: each wrapper frees its object on drop and borrows
//! what it must not outlive.

use std::ffi::{CStr, c_int, c_void};
use std::io;
use std::marker::PhantomData;
use std::net::Ipv4Addr;
use std::ptr::NonNull;

use crate::ffi;

/// An error with the failing call's name and `errno`.
fn os_error(call: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{call}: {e}"))
}

/// # Safety
/// `dev` is a device of a live device list.
unsafe fn device_name(dev: *mut ffi::IbvDevice) -> String {
    // SAFETY: the caller guarantees a live device; the name is a NUL-terminated string owned by
    // the device (null only for a null device, checked anyway).
    unsafe {
        let name = ffi::ibv_get_device_name(dev);
        if name.is_null() {
            return String::new();
        }
        CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// The names of the RDMA devices (an empty list when there are none).
pub fn device_names() -> io::Result<Vec<String>> {
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out pointer; the list is freed below.
    let list = unsafe { ffi::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(os_error("ibv_get_device_list"));
    }
    let count = usize::try_from(n).unwrap_or(0);
    // SAFETY: the list holds `count` device pointers, live until it is freed.
    let names = (0..count)
        .map(|i| unsafe { device_name(*list.add(i)) })
        .collect();
    // SAFETY: the list came from ibv_get_device_list and is freed once.
    unsafe { ffi::ibv_free_device_list(list) };
    Ok(names)
}

/// An open device.
pub struct Context {
    ctx: NonNull<ffi::IbvContext>,
}

impl Context {
    /// Opens the device called `name`.
    pub fn open(name: &str) -> io::Result<Self> {
        let mut n: c_int = 0;
        // SAFETY: as in `device_names`.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(os_error("ibv_get_device_list"));
        }
        let mut opened = Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no RDMA device {name}"),
        ));
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: index within the live list.
            let dev = unsafe { *list.add(i) };
            // SAFETY: a device of the live list.
            if unsafe { device_name(dev) } == name {
                // SAFETY: a device of the live list; the context stays valid after the list is
                // freed (it holds its own reference).
                let ctx = unsafe { ffi::ibv_open_device(dev) };
                opened = NonNull::new(ctx)
                    .map(|ctx| Self { ctx })
                    .ok_or_else(|| os_error("ibv_open_device"));
                break;
            }
        }
        // SAFETY: freed once.
        unsafe { ffi::ibv_free_device_list(list) };
        opened
    }

    /// State and active MTU (bytes) of `port`.
    pub fn port(&self, port: u8) -> io::Result<(bool, u32)> {
        let mut attr = ffi::IbvPortAttr {
            state: 0,
            max_mtu: 0,
            active_mtu: 0,
            rest: [0; 32],
        };
        // SAFETY: a live context and an out struct larger than the library's.
        if unsafe { ffi::ibv_query_port(self.ctx.as_ptr(), port, &mut attr) } != 0 {
            return Err(os_error("ibv_query_port"));
        }
        // enum ibv_mtu: 1 = 256 bytes ... 5 = 4096 bytes
        let mtu = if (1..=5).contains(&attr.active_mtu) {
            128 << attr.active_mtu
        } else {
            0
        };
        Ok((attr.state == ffi::IBV_PORT_ACTIVE, mtu))
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: opened by ibv_open_device; everything created from it borrows `self`, so it
        // is gone already.
        unsafe { ffi::ibv_close_device(self.ctx.as_ptr()) };
    }
}

/// A protection domain.
pub struct Pd<'c> {
    pd: NonNull<ffi::Opaque>,
    _ctx: PhantomData<&'c Context>,
}

impl<'c> Pd<'c> {
    /// Allocates a protection domain on `ctx`.
    pub fn new(ctx: &'c Context) -> io::Result<Self> {
        // SAFETY: a live context.
        let pd = unsafe { ffi::ibv_alloc_pd(ctx.ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| os_error("ibv_alloc_pd"))?;
        Ok(Self {
            pd,
            _ctx: PhantomData,
        })
    }
}

impl Drop for Pd<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd; its MRs borrow `self`, so they are gone.
        unsafe { ffi::ibv_dealloc_pd(self.pd.as_ptr()) };
    }
}

/// A memory region over a borrowed buffer.
pub struct Mr<'p> {
    mr: NonNull<ffi::IbvMr>,
    _borrow: PhantomData<(&'p Pd<'p>, &'p mut [u8])>,
}

impl<'p> Mr<'p> {
    /// Registers `buf` for local write and remote read/write.
    pub fn register(pd: &'p Pd<'_>, buf: &'p mut [u8]) -> io::Result<Self> {
        let access = ffi::IBV_ACCESS_LOCAL_WRITE
            | ffi::IBV_ACCESS_REMOTE_WRITE
            | ffi::IBV_ACCESS_REMOTE_READ;
        // SAFETY: a live PD and a buffer that stays borrowed (not moved or freed) as long as
        // the registration exists.
        let mr = unsafe {
            ffi::ibv_reg_mr(
                pd.pd.as_ptr(),
                buf.as_mut_ptr().cast::<c_void>(),
                buf.len(),
                access,
            )
        };
        let mr = NonNull::new(mr).ok_or_else(|| os_error("ibv_reg_mr"))?;
        Ok(Self {
            mr,
            _borrow: PhantomData,
        })
    }

    /// (address, length, lkey, rkey) as the device sees them.
    pub fn keys(&self) -> (usize, usize, u32, u32) {
        // SAFETY: a live MR; these fields are set by ibv_reg_mr and never change.
        let mr = unsafe { self.mr.as_ref() };
        (mr.addr as usize, mr.length, mr.lkey, mr.rkey)
    }
}

impl Drop for Mr<'_> {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr, deregistered once.
        unsafe { ffi::ibv_dereg_mr(self.mr.as_ptr()) };
    }
}

/// A completion queue.
pub struct Cq<'c> {
    cq: NonNull<ffi::Opaque>,
    _ctx: PhantomData<&'c Context>,
}

impl<'c> Cq<'c> {
    /// Creates a completion queue with at least `entries` entries.
    pub fn new(ctx: &'c Context, entries: i32) -> io::Result<Self> {
        // SAFETY: a live context; no completion channel.
        let cq = unsafe {
            ffi::ibv_create_cq(
                ctx.ctx.as_ptr(),
                entries,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        let cq = NonNull::new(cq).ok_or_else(|| os_error("ibv_create_cq"))?;
        Ok(Self {
            cq,
            _ctx: PhantomData,
        })
    }
}

impl Drop for Cq<'_> {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_cq, destroyed once.
        unsafe { ffi::ibv_destroy_cq(self.cq.as_ptr()) };
    }
}

/// Binds an rdma_cm id to `addr` and returns the name of the RDMA device the address
/// resolved to.
pub fn cm_bound_device(addr: Ipv4Addr) -> io::Result<String> {
    // SAFETY: no arguments; destroyed below.
    let channel = unsafe { ffi::rdma_create_event_channel() };
    if channel.is_null() {
        return Err(os_error("rdma_create_event_channel"));
    }
    let mut id: *mut ffi::RdmaCmId = std::ptr::null_mut();
    // SAFETY: a live channel and a valid out pointer.
    let result =
        if unsafe { ffi::rdma_create_id(channel, &mut id, std::ptr::null_mut(), ffi::RDMA_PS_TCP) }
            != 0
        {
            Err(os_error("rdma_create_id"))
        } else {
            let sa = ffi::SockaddrIn {
                family: ffi::AF_INET,
                port_be: 0,
                addr: addr.octets(),
                zero: [0; 8],
            };
            // SAFETY: a live id and a sockaddr_in that outlives the call.
            let bound = if unsafe { ffi::rdma_bind_addr(id, &sa) } != 0 {
                Err(os_error(&format!("rdma_bind_addr({addr})")))
            } else {
                // SAFETY: a live id; after a successful bind to a local RDMA address `verbs` is the
                // device context (null otherwise), whose first field is the device.
                unsafe {
                    let verbs = (*id).verbs;
                    if verbs.is_null() {
                        Err(io::Error::other(format!(
                            "{addr} is bound to no RDMA device"
                        )))
                    } else {
                        Ok(device_name((*verbs).device))
                    }
                }
            };
            // SAFETY: created above, destroyed once.
            unsafe { ffi::rdma_destroy_id(id) };
            bound
        };
    // SAFETY: created above, no ids left on it.
    unsafe { ffi::rdma_destroy_event_channel(channel) };
    result
}
