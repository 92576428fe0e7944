//! Local (lookaside) mode: the kernel runs in this process, with the same API and no NAA.
//!
//! An `NAA_SPEC` entry `local:FN_CODE:PARAM_COUNT` (for example `NAA_SPEC=local:1:2`), or
//! [`NaaOptions::local`](crate::NaaOptions::local) in code, connects a handle to an
//! **in-process NAA**: a software NAA ([`crate::swnaa`]) started on first use in this process
//! and reached through the in-process transport ([`crate::transport::local`]): no sockets, no
//! other process, and what need not move is not copied. The NAA uses an in-place parameter
//! (one both sent and received in every RPC) whose memory the library owns (a [`Buffer`] or
//! [`Param`](crate::Param) from a `Vec`) as its own region, so the kernel works on the
//! caller's memory; other parameters, and memory the program owns (a C or NumPy array,
//! [`Buffer::from_raw_parts`]), are copied (in before the kernel, out after it).
//! A handle behaves as against a software NAA in every other respect (the same server code:
//! MRSP limits and error codes, kernels and their return codes, deadlines and
//! KERNEL_TIMEOUT, cancel), so a program runs unchanged against local, software and FPGA
//! NAAs by changing only `NAA_SPEC`. It is meant for development without an NAA and as
//! COPA's lookaside mode (an accelerator invoked locally through the same interface as a
//! remote one).
//!
//! A shared in-place parameter costs one copy per RPC all the same: the NAA keeps what the
//! caller sent, so that a kernel that overruns its deadline, or is still running when its RPC
//! is cancelled, leaves the caller's data as it was (a remote NAA answers KERNEL_TIMEOUT
//! without outputs). One thing differs from a remote NAA: after a cancel, locking such a
//! buffer waits until the cancelled kernel returns. The program's own memory is not shared
//! for that reason: the program may use it again as soon as a cancel or timeout returns.
//!
//! `local:FN_CODE:PARAM_COUNT:soft` (or [`NaaOptions::local_over_soft`](crate::NaaOptions))
//! reaches a second in-process NAA over the software transport on the loopback interface
//! (`127.0.0.1`, a free port) instead: every byte goes through a TCP socket, as it would to a
//! software NAA on another host, for testing the transport. A transport that cannot reach the
//! in-process transport's NAA (a program built on [`SoftTransport`] alone, say) reaches this
//! one.
//!
//! Its workers wait for their handles as `NAAICE_WAIT` says (read when it starts), as the
//! handles do.
//!
//! Its kernels are the software NAA's built-ins (1 adds 1 to every byte, 2 adds 2, 3 does
//! nothing) plus those registered with [`register_kernel`]. A registration after an
//! in-process NAA started takes effect for handles created afterwards: the running NAA keeps
//! serving its connections, and the next local handle starts a new one with the new set.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use naaice_core::FunctionCode;

use crate::error::Result;
#[cfg(doc)]
use crate::memory::Buffer;
use crate::swnaa::{Kernel, KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use crate::transport::Transport;
use crate::transport::local::LocalTransport;
use crate::transport::soft::SoftTransport;

/// The address field of a local `NAA_SPEC` entry (`local:FN_CODE:PARAM_COUNT`).
pub use crate::discovery::spec::LOCAL_HOST;

/// Most concurrent handles of one in-process NAA.
const MAX_CONNECTIONS: usize = 256;
/// Region memory of ended handles that the in-process NAA keeps for the next ones
/// ([`SoftNaaConfig::region_cache`]): less than a stand-alone NAA keeps, as it is the
/// program's own memory.
const REGION_CACHE: u64 = 64 << 20;

/// The process's in-process NAAs.
struct State {
    /// The process the NAAs below run in (a child of `fork` inherits this state, not their
    /// threads).
    pid: u32,
    /// The kernels the next in-process NAA starts with.
    kernels: KernelRegistry,
    /// The NAA new local handles connect to, over the in-process transport; `None` before
    /// the first, or after a registration changed the kernels.
    current: Option<SoftNaaHandle>,
    /// The same over the software transport on the loopback interface.
    current_soft: Option<SoftNaaHandle>,
    /// Earlier NAAs, still serving the handles connected to them (until the process ends).
    retired: Vec<SoftNaaHandle>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn state() -> MutexGuard<'static, Option<State>> {
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(st) = guard.as_mut()
        && st.pid != std::process::id()
    {
        st.forget_inherited();
    }
    guard
}

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut guard = state();
    let st = guard.get_or_insert_with(|| State {
        pid: std::process::id(),
        kernels: KernelRegistry::builtin(),
        current: None,
        current_soft: None,
        retired: Vec::new(),
    });
    f(st)
}

/// Registers (or replaces) the local kernel for `code`; returns the previous one. Handles
/// created afterwards see it.
pub fn register_kernel(
    code: FunctionCode,
    kernel: impl Kernel + 'static,
) -> Option<Arc<dyn Kernel>> {
    with_state(|st| {
        let old = st.kernels.register(code, kernel);
        st.retire();
        old
    })
}

/// Removes the local kernel for `code` (also a built-in one): handles created afterwards get
/// SOCKET_UNAVAIL for it.
pub fn remove_kernel(code: FunctionCode) -> Option<Arc<dyn Kernel>> {
    with_state(|st| {
        let old = st.kernels.remove(code);
        st.retire();
        old
    })
}

impl State {
    /// In a child of `fork`: the parent's NAAs have no threads here, so local handles get
    /// new ones (with the same kernels). Their handles are forgotten, not dropped: dropping
    /// one would wait for threads that do not exist in this process.
    fn forget_inherited(&mut self) {
        let inherited = self
            .current
            .take()
            .into_iter()
            .chain(self.current_soft.take());
        for naa in inherited.chain(self.retired.drain(..)) {
            std::mem::forget(naa);
        }
        self.pid = std::process::id();
        tracing::debug!("local mode: a new process (fork): new in-process NAAs on first use");
    }

    /// The running NAAs serve on; new handles get new ones.
    fn retire(&mut self) {
        self.retired.extend(self.current.take());
        self.retired.extend(self.current_soft.take());
    }
}

/// How a handle reaches an in-process NAA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Through the in-process transport ([`address`]).
    InProcess,
    /// Through the software transport on the loopback interface ([`loopback_address`]).
    Loopback,
}

/// The address of the in-process NAA (reached through the in-process transport), started
/// now if it is not running.
pub fn address() -> Result<SocketAddr> {
    with_state(|st| {
        start(
            &mut st.current,
            &st.kernels,
            LocalTransport,
            LocalTransport::any(),
        )
    })
}

/// The address of the in-process NAA reached over the software transport on the loopback
/// interface (`127.0.0.1`), started now if it is not running.
pub fn loopback_address() -> Result<SocketAddr> {
    with_state(|st| {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        start(
            &mut st.current_soft,
            &st.kernels,
            SoftTransport::default(),
            loopback,
        )
    })
}

/// The address of the NAA in `slot`, started on `addr` with `transport` if there is none.
fn start<T>(
    slot: &mut Option<SoftNaaHandle>,
    kernels: &KernelRegistry,
    transport: T,
    addr: SocketAddr,
) -> Result<SocketAddr>
where
    T: Transport + 'static,
    T::Listener: 'static,
    T::Endpoint: 'static,
{
    if let Some(naa) = slot {
        return Ok(naa.local_addr());
    }
    // The workers wait as the program's handles do (`NAAICE_WAIT`; its errors are the
    // handles' to report).
    let config = SoftNaaConfig {
        max_connections: MAX_CONNECTIONS,
        region_cache: REGION_CACHE,
        wait: crate::discovery::environment::wait_policy_from_env().unwrap_or_default(),
        ..SoftNaaConfig::default()
    };
    let naa = SoftNaa::bind(transport, addr, config, kernels.clone())?.spawn()?;
    let addr = naa.local_addr();
    tracing::debug!(%addr, "in-process NAA started (local mode)");
    Ok(slot.insert(naa).local_addr())
}

/// How `addr` is reached if it is one of this process's in-process NAAs.
pub fn reach(addr: SocketAddr) -> Option<Reach> {
    if crate::transport::local::is_listening(addr) {
        return Some(Reach::InProcess);
    }
    is_local(addr).then_some(Reach::Loopback)
}

/// The kernels local handles created now get, as a catalog (one `CODE NAME` line each,
/// [`KernelRegistry::catalog`]).
pub fn catalog() -> String {
    with_state(|st| st.kernels.catalog())
}

/// True if `addr` is one of this process's in-process NAAs.
pub fn is_local(addr: SocketAddr) -> bool {
    let guard = state();
    guard.as_ref().is_some_and(|st| {
        st.current
            .iter()
            .chain(&st.current_soft)
            .chain(&st.retired)
            .any(|naa| naa.local_addr() == addr)
    })
}
