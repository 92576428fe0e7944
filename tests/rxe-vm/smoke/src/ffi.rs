//! The few libibverbs / librdmacm symbols the smoke tests use (exported functions only, no
//! inline wrappers), and the leading fields of the structs they read, which are part of the
//! stable ABI.

use std::ffi::{c_char, c_int, c_void};

/// `struct ibv_device` (opaque).
#[repr(C)]
pub(crate) struct IbvDevice {
    _opaque: [u8; 0],
}

/// `struct ibv_context`: starts with the device pointer.
#[repr(C)]
pub(crate) struct IbvContext {
    pub(crate) device: *mut IbvDevice,
}

/// `struct ibv_pd`, `struct ibv_cq` and `struct rdma_event_channel` (opaque).
#[repr(C)]
pub(crate) struct Opaque {
    _opaque: [u8; 0],
}

/// `struct ibv_mr`.
#[repr(C)]
pub(crate) struct IbvMr {
    pub(crate) context: *mut IbvContext,
    pub(crate) pd: *mut Opaque,
    pub(crate) addr: *mut c_void,
    pub(crate) length: usize,
    pub(crate) handle: u32,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// `struct ibv_port_attr`: the leading fields, then room for the rest (the library writes the
/// whole struct of its version).
#[repr(C)]
pub(crate) struct IbvPortAttr {
    pub(crate) state: u32,
    pub(crate) max_mtu: u32,
    pub(crate) active_mtu: u32,
    pub(crate) rest: [u32; 32],
}

/// `struct rdma_cm_id`: starts with the verbs context it is bound to (null before binding).
#[repr(C)]
pub(crate) struct RdmaCmId {
    pub(crate) verbs: *mut IbvContext,
}

/// `struct sockaddr_in`.
#[repr(C)]
pub(crate) struct SockaddrIn {
    pub(crate) family: u16,
    pub(crate) port_be: u16,
    pub(crate) addr: [u8; 4],
    pub(crate) zero: [u8; 8],
}

pub(crate) const AF_INET: u16 = 2;
pub(crate) const RDMA_PS_TCP: c_int = 0x0106;
pub(crate) const IBV_PORT_ACTIVE: u32 = 4;
pub(crate) const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
pub(crate) const IBV_ACCESS_REMOTE_WRITE: c_int = 2;
pub(crate) const IBV_ACCESS_REMOTE_READ: c_int = 4;

#[link(name = "ibverbs")]
unsafe extern "C" {
    pub(crate) fn ibv_get_device_list(num: *mut c_int) -> *mut *mut IbvDevice;
    pub(crate) fn ibv_free_device_list(list: *mut *mut IbvDevice);
    pub(crate) fn ibv_get_device_name(dev: *mut IbvDevice) -> *const c_char;
    pub(crate) fn ibv_open_device(dev: *mut IbvDevice) -> *mut IbvContext;
    pub(crate) fn ibv_close_device(ctx: *mut IbvContext) -> c_int;
    pub(crate) fn ibv_query_port(ctx: *mut IbvContext, port: u8, attr: *mut IbvPortAttr) -> c_int;
    pub(crate) fn ibv_alloc_pd(ctx: *mut IbvContext) -> *mut Opaque;
    pub(crate) fn ibv_dealloc_pd(pd: *mut Opaque) -> c_int;
    pub(crate) fn ibv_reg_mr(
        pd: *mut Opaque,
        addr: *mut c_void,
        len: usize,
        access: c_int,
    ) -> *mut IbvMr;
    pub(crate) fn ibv_dereg_mr(mr: *mut IbvMr) -> c_int;
    pub(crate) fn ibv_create_cq(
        ctx: *mut IbvContext,
        cqe: c_int,
        user: *mut c_void,
        channel: *mut Opaque,
        vector: c_int,
    ) -> *mut Opaque;
    pub(crate) fn ibv_destroy_cq(cq: *mut Opaque) -> c_int;
}

#[link(name = "rdmacm")]
unsafe extern "C" {
    pub(crate) fn rdma_create_event_channel() -> *mut Opaque;
    pub(crate) fn rdma_destroy_event_channel(channel: *mut Opaque);
    pub(crate) fn rdma_create_id(
        channel: *mut Opaque,
        id: *mut *mut RdmaCmId,
        context: *mut c_void,
        ps: c_int,
    ) -> c_int;
    pub(crate) fn rdma_bind_addr(id: *mut RdmaCmId, addr: *const SockaddrIn) -> c_int;
    pub(crate) fn rdma_destroy_id(id: *mut RdmaCmId) -> c_int;
}
