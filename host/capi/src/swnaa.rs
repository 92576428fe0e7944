//! The software NAA for C programs: `naa_swnaa_*` runs the reference's server (spec section 5, minus
//! its defects) inside a C program, with kernels written in C and registered by function code.
//!
//! ```c
//! naa_swnaa *naa = naa_swnaa_new();               // built-in kernels 1, 2, 3 registered
//! naa_swnaa_register_kernel(naa, 10, vector_add, NULL);
//! naa_swnaa_start(naa, "0.0.0.0", 12345);          // serves on background threads
//! ...
//! naa_swnaa_destroy(naa);                           // disconnects clients, joins threads
//! ```
//!
//! Each connection is served by its own thread, so a kernel may run on several threads at
//! once (for different clients): kernels and their `user_data` must be thread-safe. A kernel
//! that runs longer than the kernel timeout is answered with KERNEL_TIMEOUT (the kernel itself
//! runs to its end; its result is discarded). Function codes without a kernel are answered
//! with SOCKET_UNAVAIL. The transport is chosen by `NAAICE_TRANSPORT` like for clients.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use naaice::core::FunctionCode;
use naaice::swnaa::{CKernel, CKernelFn, KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};

use crate::boundary::{FAILURE, SUCCESS, fail, guard};
use crate::error::Failure;
use crate::handles::{Handles, as_ptr, id_of};
use crate::transport::transport_from_env;

/// Region flag: NAA-only scratch memory (never transferred).
pub const NAA_REGION_INTERNAL: u8 = 0x01;
/// Region flag: an input transferred only with the first RPC.
pub const NAA_REGION_SINGLESEND: u8 = 0x02;
/// Region flag: the client writes this region with every RPC.
pub const NAA_REGION_INPUT: u8 = 0x04;
/// Region flag: the NAA writes this region back after every RPC.
pub const NAA_REGION_OUTPUT: u8 = 0x08;

/// A software NAA (opaque; the pointer is an identifier, never dereferenced).
pub struct naa_swnaa {
    _private: [u8; 0],
}

/// One region as a kernel sees it: the NAA's copy of a client parameter (or an internal
/// region), in the client's parameter order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct naa_swnaa_region {
    /// Start of the region's memory (valid for the kernel's run only).
    pub addr: *mut c_void,
    /// Length in bytes.
    pub size: usize,
    /// `NAA_REGION_*` flags the client announced.
    pub flags: u8,
}

/// The RPC a kernel runs for.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct naa_swnaa_call {
    /// Function code (1-127).
    pub fncode: u8,
    /// The three user bytes of the client's immediate.
    pub user_bytes: [u8; 3],
    /// 1-based RPC number on this connection.
    pub rpc: u32,
}

/// A kernel: computes on `regions[0..n_regions]` (results go into the output regions) and
/// returns the RPC's return code: 0 (NAA_SUCCESS) or an application code (0x10-0x7F, up to
/// 0xFFFFFF); a larger value is sent as 0x03 (kernel failed).
pub type naa_swnaa_kernel = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        call: *const naa_swnaa_call,
        regions: *mut naa_swnaa_region,
        n_regions: usize,
    ) -> u32,
>;

/// Optional state of a kernel plugin (`naaice-swnaa --kernel CODE=PATH:SYMBOL`): the
/// library may export `int SYMBOL_init(const char *config, void **user_data)`, called once
/// when the server loads the kernel with the kernels file's `config` string (or NULL). It
/// stores the kernel's state in `*user_data` (handed to every call of the kernel) and returns
/// 0, or non-zero to refuse the load (the server does not start; a reload keeps the kernels
/// it had).
pub type naa_swnaa_kernel_init =
    Option<unsafe extern "C" fn(config: *const c_char, user_data: *mut *mut c_void) -> c_int>;

/// Optional end of a kernel plugin's state: `void SYMBOL_fini(void *user_data)`, called once
/// after the kernel's last call (the server stops, or a reload replaced the kernel and its
/// last RPC finished), before the library is closed.
pub type naa_swnaa_kernel_fini = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// The kernel function of a [`c_kernel`].
pub(crate) type KernelFn =
    unsafe extern "C" fn(*mut c_void, *const naa_swnaa_call, *mut naa_swnaa_region, usize) -> u32;

/// A C program's kernel `run` with its `user_data`, as the library's C kernel (see
/// `naa_swnaa_register_kernel` for the thread-safety contract the C program accepts).
pub(crate) fn c_kernel(run: KernelFn, user_data: *mut c_void) -> CKernel {
    // SAFETY: `naa_swnaa_call` and `naa_swnaa_region` are the library's `CKernelCall` and
    // `CKernelRegion` field for field (both `repr(C)`; the `layouts_match` test checks
    // size, alignment and offsets), so the two function pointer types have one ABI.
    let run = unsafe { std::mem::transmute::<KernelFn, CKernelFn>(run) };
    // SAFETY: the C program registered `run` with the kernel signature and, by the API's
    // contract, keeps it and `user_data` valid and thread-safe while registered.
    unsafe { CKernel::new(run, user_data, None) }
}

/// A software NAA: its settings and kernels, and the running server.
struct Server {
    state: Mutex<ServerState>,
}

struct ServerState {
    kernels: KernelRegistry,
    config: SoftNaaConfig,
    running: Option<SoftNaaHandle>,
}

impl Server {
    fn lock(&self) -> MutexGuard<'_, ServerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

static SERVERS: Handles<Server> = Handles::new();

/// Number of live software NAAs.
pub(crate) fn live_servers() -> usize {
    SERVERS.len()
}

/// Runs `body` on the software NAA `naa` refers to.
fn with_server(
    name: &'static str,
    naa: *const naa_swnaa,
    body: impl FnOnce(&mut ServerState) -> c_int,
) -> c_int {
    guard(name, FAILURE, || match server_of(name, naa, Take::Share) {
        Ok(server) => body(&mut server.lock()),
        Err(rc) => rc,
    })
}

/// Whether [`server_of`] leaves the server in the table or takes it out.
enum Take {
    Share,
    Remove,
}

/// The live software NAA `naa` refers to, or -1 (and the last error) for NULL or one that
/// is not live.
fn server_of(name: &'static str, naa: *const naa_swnaa, take: Take) -> Result<Arc<Server>, c_int> {
    if naa.is_null() {
        return Err(fail(name, "naa is NULL"));
    }
    let server = match take {
        Take::Share => SERVERS.get(id_of(naa)),
        Take::Remove => SERVERS.remove(id_of(naa)),
    };
    server.ok_or_else(|| fail(name, "unknown software NAA (destroyed, or never created)"))
}

/// Takes the running server of `naa` out under the lock (`None` if it is not running), to be
/// shut down without holding the lock: a kernel that is still running may call into this
/// server meanwhile.
fn take_running(
    name: &'static str,
    naa: *const naa_swnaa,
    take: Take,
) -> Result<Option<SoftNaaHandle>, c_int> {
    let server = server_of(name, naa, take)?;
    let running = server.lock().running.take();
    Ok(running)
}

/// The function code `code` if it is 1-127.
pub(crate) fn function_code(name: &'static str, code: c_uint) -> Result<FunctionCode, c_int> {
    u8::try_from(code)
        .ok()
        .and_then(FunctionCode::new)
        .ok_or_else(|| fail(name, format!("function code {code} is not in 1..=127")))
}

/// Applies `change` to the software NAA `naa` refers to; 0, or -1 with the reason `invalid`
/// (a bad argument), or if the server runs.
fn configure(
    name: &'static str,
    naa: *const naa_swnaa,
    invalid: Option<&'static str>,
    change: impl FnOnce(&mut ServerState),
) -> c_int {
    with_server(name, naa, |state| {
        if let Some(why) = invalid {
            return fail(name, why);
        }
        if let Err(rc) = stopped(name, state) {
            return rc;
        }
        change(state);
        SUCCESS
    })
}

/// Refuses changes while the server runs.
fn stopped(name: &'static str, state: &ServerState) -> Result<(), c_int> {
    match state.running {
        Some(_) => Err(fail(
            name,
            Failure::state("the software NAA is running; stop it first"),
        )),
        None => Ok(()),
    }
}

/// Creates a software NAA (not yet listening) with the reference's built-in kernels: 1 adds
/// 1 to every byte of every parameter region, 2 adds 2, 3 does nothing. Defaults: at most as
/// many concurrent connections as the machine has cores, 10 s kernel timeout.
///
/// Returns NULL on failure. Free it with `naa_swnaa_destroy`.
#[unsafe(no_mangle)]
pub extern "C" fn naa_swnaa_new() -> *mut naa_swnaa {
    guard("naa_swnaa_new", std::ptr::null_mut(), || {
        let id = SERVERS.insert(Server {
            state: Mutex::new(ServerState {
                kernels: KernelRegistry::builtin(),
                config: SoftNaaConfig::default(),
                running: None,
            }),
        });
        as_ptr(id)
    })
}

/// Registers (or replaces) the kernel for `fncode` (1-127). `user_data` is passed to every
/// call. Kernels run on the server's worker threads, several at once for different clients:
/// the kernel and `user_data` must be thread-safe and stay valid until `naa_swnaa_destroy`.
///
/// Returns 0, or -1 (invalid arguments, or the server is running).
#[unsafe(no_mangle)]
pub extern "C" fn naa_swnaa_register_kernel(
    naa: *mut naa_swnaa,
    fncode: c_uint,
    kernel: naa_swnaa_kernel,
    user_data: *mut c_void,
) -> c_int {
    const NAME: &str = "naa_swnaa_register_kernel";
    with_server(NAME, naa, |state| {
        let code = match function_code(NAME, fncode) {
            Ok(c) => c,
            Err(rc) => return rc,
        };
        let Some(run) = kernel else {
            return fail(NAME, "kernel is NULL");
        };
        if let Err(rc) = stopped(NAME, state) {
            return rc;
        }
        state.kernels.register(code, c_kernel(run, user_data));
        SUCCESS
    })
}

/// Removes the kernel for `fncode` (also a built-in one); its RPCs are then answered with
/// SOCKET_UNAVAIL. Returns 0, or -1 (invalid arguments, no such kernel, or running).
#[unsafe(no_mangle)]
pub extern "C" fn naa_swnaa_remove_kernel(naa: *mut naa_swnaa, fncode: c_uint) -> c_int {
    const NAME: &str = "naa_swnaa_remove_kernel";
    with_server(NAME, naa, |state| {
        let code = match function_code(NAME, fncode) {
            Ok(c) => c,
            Err(rc) => return rc,
        };
        if let Err(rc) = stopped(NAME, state) {
            return rc;
        }
        match state.kernels.remove(code) {
            Some(_) => SUCCESS,
            None => fail(NAME, format!("no kernel for function code {fncode}")),
        }
    })
}

/// Sets the most concurrent connections (at least 1); more are rejected with a reason.
/// Returns 0, or -1 (invalid arguments, or running).
#[unsafe(no_mangle)]
pub extern "C" fn naa_swnaa_set_max_connections(naa: *mut naa_swnaa, max: c_uint) -> c_int {
    const NAME: &str = "naa_swnaa_set_max_connections";
    let invalid = (max == 0).then_some("max must be at least 1");
    configure(NAME, naa, invalid, |state| {
        state.config.max_connections = max as usize;
    })
}

/// Sets how long a kernel may run (milliseconds, at least 1) before the RPC is answered with
/// KERNEL_TIMEOUT. Returns 0, or -1 (invalid arguments, or running).
#[unsafe(no_mangle)]
pub extern "C" fn naa_swnaa_set_kernel_timeout_ms(naa: *mut naa_swnaa, ms: u64) -> c_int {
    const NAME: &str = "naa_swnaa_set_kernel_timeout_ms";
    let invalid = (ms == 0).then_some("the timeout must be at least 1 ms");
    configure(NAME, naa, invalid, |state| {
        state.config.kernel_timeout = Duration::from_millis(ms);
    })
}

/// Serves the NAA's metrics in the Prometheus text format over HTTP (`GET /metrics`) from the
/// next `naa_swnaa_start`, on `address` (an IP address or host name; NULL means 127.0.0.1,
/// this machine only) and `port` (0 picks a free port, see `naa_swnaa_metrics_port`). Off
/// unless set; the clients' address checks do not cover it: bind it where only the
/// monitoring network reaches. Returns 0, or -1 (address invalid, or running).
///
/// # Safety
/// `address` must be NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_swnaa_set_metrics(
    naa: *mut naa_swnaa,
    address: *const c_char,
    port: u16,
) -> c_int {
    const NAME: &str = "naa_swnaa_set_metrics";
    let addr = if address.is_null() {
        Ok(SocketAddr::from(([127, 0, 0, 1], port)))
    } else {
        // SAFETY: forwarded caller guarantee (non-null here).
        unsafe { listen_addr(address, port) }
    };
    match addr {
        Ok(addr) => configure(NAME, naa, None, |state| state.config.metrics = Some(addr)),
        Err(e) => with_server(NAME, naa, |_| fail(NAME, e)),
    }
}

/// The port of the running server's metrics endpoint, or -1 if it is not running or serves
/// no metrics.
#[unsafe(no_mangle)]
pub extern "C" fn naa_swnaa_metrics_port(naa: *mut naa_swnaa) -> c_int {
    const NAME: &str = "naa_swnaa_metrics_port";
    with_server(NAME, naa, |state| {
        match state.running.as_ref().map(SoftNaaHandle::metrics_addr) {
            Some(Some(addr)) => c_int::from(addr.port()),
            Some(None) => fail(NAME, Failure::state("no metrics (naa_swnaa_set_metrics)")),
            None => fail(NAME, Failure::state("not running")),
        }
    })
}

/// Parses the listen address.
///
/// # Safety
/// `address` must be NULL or a NUL-terminated string.
unsafe fn listen_addr(address: *const c_char, port: u16) -> Result<SocketAddr, String> {
    let host = if address.is_null() {
        "0.0.0.0".to_owned()
    } else {
        // SAFETY: non-null and NUL-terminated by the caller's guarantee.
        let s = unsafe { CStr::from_ptr(address) };
        s.to_str()
            .map_err(|_| "address is not valid UTF-8".to_owned())?
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned()
    };
    (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("no address for {host:?}"))
}

/// Starts serving on `address` (an IP address or host name; NULL means all IPv4 addresses)
/// and `port` (0 picks a free port, see `naa_swnaa_port`; the reference uses 12345), on
/// background threads, with the transport `NAAICE_TRANSPORT` selects. Returns at once.
///
/// Returns 0, or -1 (already running, address invalid or in use, transport unavailable).
///
/// # Safety
/// `address` must be NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_swnaa_start(
    naa: *mut naa_swnaa,
    address: *const c_char,
    port: u16,
) -> c_int {
    const NAME: &str = "naa_swnaa_start";
    with_server(NAME, naa, |state| {
        if state.running.is_some() {
            return fail(NAME, Failure::state("already running"));
        }
        // SAFETY: forwarded caller guarantee.
        let addr = match unsafe { listen_addr(address, port) } {
            Ok(a) => a,
            Err(e) => return fail(NAME, e),
        };
        let transport = match transport_from_env() {
            Ok(t) => t,
            Err(e) => return fail(NAME, Failure::config(e)),
        };
        let wait = match naaice::discovery::environment::wait_policy_from_env() {
            Ok(w) => w,
            Err(e) => return fail(NAME, Failure::config(e.to_string())),
        };
        let (config, kernels) = (state.config.clone(), state.kernels.clone());
        let config = SoftNaaConfig { wait, ..config };
        let spawned = SoftNaa::bind(transport, addr, config, kernels)
            .and_then(|naa| {
                for served in naa.served() {
                    tracing::info!("software NAA: {served}");
                }
                naa.spawn()
            })
            .map_err(|e| e.to_string());
        match spawned {
            Ok(handle) => {
                tracing::info!(addr = %handle.local_addr(), "software NAA started");
                state.running = Some(handle);
                SUCCESS
            }
            Err(e) => fail(
                NAME,
                Failure::new(
                    crate::error::naa_error_kind::NAA_ERRKIND_TRANSPORT,
                    format!("cannot serve on {addr}: {e}"),
                ),
            ),
        }
    })
}

/// The port the running server listens on, or -1 if it is not running.
#[unsafe(no_mangle)]
pub extern "C" fn naa_swnaa_port(naa: *mut naa_swnaa) -> c_int {
    const NAME: &str = "naa_swnaa_port";
    with_server(NAME, naa, |state| match &state.running {
        Some(h) => c_int::from(h.local_addr().port()),
        None => fail(NAME, Failure::state("not running")),
    })
}

/// Stops serving: stops accepting, disconnects every client and waits for all server
/// threads (a kernel still running is waited for). It can be started again. Returns 0, or
/// -1 (not running, invalid arguments).
#[unsafe(no_mangle)]
pub extern "C" fn naa_swnaa_stop(naa: *mut naa_swnaa) -> c_int {
    const NAME: &str = "naa_swnaa_stop";
    guard(NAME, FAILURE, || {
        match take_running(NAME, naa, Take::Share) {
            Ok(Some(h)) => {
                h.shutdown();
                SUCCESS
            }
            Ok(None) => fail(NAME, Failure::state("not running")),
            Err(rc) => rc,
        }
    })
}

/// Stops the server if it runs (like `naa_swnaa_stop`) and frees it. Returns 0, or -1 if
/// `naa` is NULL or not a live software NAA (for example destroyed already: destroying twice
/// is an error, not a crash).
#[unsafe(no_mangle)]
pub extern "C" fn naa_swnaa_destroy(naa: *mut naa_swnaa) -> c_int {
    const NAME: &str = "naa_swnaa_destroy";
    guard(NAME, FAILURE, || {
        match take_running(NAME, naa, Take::Remove) {
            Ok(running) => {
                if let Some(h) = running {
                    h.shutdown();
                }
                SUCCESS
            }
            Err(rc) => rc,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use naaice::core::RegionFlags;
    use std::mem::{align_of, offset_of, size_of};

    use naaice::swnaa::{CKernelCall, CKernelRegion};

    #[test]
    fn layouts_match() {
        assert_eq!(size_of::<naa_swnaa_call>(), size_of::<CKernelCall>());
        assert_eq!(align_of::<naa_swnaa_call>(), align_of::<CKernelCall>());
        assert_eq!(
            offset_of!(naa_swnaa_call, fncode),
            offset_of!(CKernelCall, fncode)
        );
        assert_eq!(
            offset_of!(naa_swnaa_call, user_bytes),
            offset_of!(CKernelCall, user_bytes)
        );
        assert_eq!(
            offset_of!(naa_swnaa_call, rpc),
            offset_of!(CKernelCall, rpc)
        );
        assert_eq!(size_of::<naa_swnaa_region>(), size_of::<CKernelRegion>());
        assert_eq!(align_of::<naa_swnaa_region>(), align_of::<CKernelRegion>());
        assert_eq!(
            offset_of!(naa_swnaa_region, addr),
            offset_of!(CKernelRegion, addr)
        );
        assert_eq!(
            offset_of!(naa_swnaa_region, size),
            offset_of!(CKernelRegion, size)
        );
        assert_eq!(
            offset_of!(naa_swnaa_region, flags),
            offset_of!(CKernelRegion, flags)
        );
    }

    #[test]
    fn region_flags_are_the_wire_values() {
        assert_eq!(NAA_REGION_INTERNAL, RegionFlags::INTERNAL.bits());
        assert_eq!(NAA_REGION_SINGLESEND, RegionFlags::SINGLESEND.bits());
        assert_eq!(NAA_REGION_INPUT, RegionFlags::INPUT.bits());
        assert_eq!(NAA_REGION_OUTPUT, RegionFlags::OUTPUT.bits());
    }

    /// GET /metrics from `port` on 127.0.0.1: the response.
    fn scrape(port: u16) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .expect("request");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("response");
        text
    }

    #[test]
    fn a_c_software_naa_serves_its_metrics_when_asked() {
        let naa = naa_swnaa_new();
        assert!(!naa.is_null());
        // Off by default.
        // SAFETY: a valid NUL-terminated address.
        assert_eq!(
            unsafe { naa_swnaa_start(naa, c"127.0.0.1".as_ptr(), 0) },
            SUCCESS
        );
        assert_eq!(naa_swnaa_metrics_port(naa), FAILURE);
        // Refused while running.
        // SAFETY: NULL is allowed.
        assert_eq!(
            unsafe { naa_swnaa_set_metrics(naa, std::ptr::null(), 0) },
            FAILURE
        );
        assert_eq!(naa_swnaa_stop(naa), SUCCESS);
        // An address that does not resolve is refused.
        // SAFETY: a valid NUL-terminated string.
        assert_eq!(
            unsafe { naa_swnaa_set_metrics(naa, c"no such host.invalid".as_ptr(), 0) },
            FAILURE
        );
        // SAFETY: NULL is allowed: 127.0.0.1.
        assert_eq!(
            unsafe { naa_swnaa_set_metrics(naa, std::ptr::null(), 0) },
            SUCCESS
        );
        // SAFETY: as above.
        assert_eq!(
            unsafe { naa_swnaa_start(naa, c"127.0.0.1".as_ptr(), 0) },
            SUCCESS
        );
        let port = naa_swnaa_metrics_port(naa);
        assert!(port > 0, "metrics port {port}");
        let text = scrape(u16::try_from(port).expect("a port"));
        assert!(text.starts_with("HTTP/1."), "{text}");
        assert!(
            text.contains("naaice_naa_connections_accepted_total 0"),
            "{text}"
        );
        assert_eq!(naa_swnaa_destroy(naa), SUCCESS);
    }
}
