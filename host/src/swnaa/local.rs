//! Local (lookaside) mode: the kernel runs in this process, with the same API and no NAA.
//!
//! An `NAA_SPEC` entry `local:FN_CODE:PARAM_COUNT` (for example `NAA_SPEC=local:1:2`), or
//! [`NaaOptions::local`](crate::NaaOptions::local) in code, connects a handle to an
//! **in-process NAA**: a software NAA ([`crate::swnaa`]) started on first use on the loopback
//! interface (`127.0.0.1`, a free port), reached with the software transport whatever
//! transport the program chose. Nothing leaves the machine, no NAA is needed, and a handle
//! behaves exactly as against a software NAA (the same server code, the same protocol), so a
//! program runs unchanged against local, software and FPGA NAAs by changing only
//! `NAA_SPEC`. It is meant for development without an NAA and as COPA's lookaside mode (an
//! accelerator invoked locally through the same interface as a remote one).
//!
//! Its kernels are the software NAA's built-ins (1 adds 1 to every byte, 2 adds 2, 3 does
//! nothing) plus those registered with [`register_kernel`]. A registration after the
//! in-process NAA started takes effect for handles created afterwards: the running NAA keeps
//! serving its connections, and the next local handle starts a new one with the new set.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use naaice_core::FunctionCode;

use crate::error::Result;
use crate::swnaa::{Kernel, KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use crate::transport::soft::SoftTransport;

/// The address field of a local `NAA_SPEC` entry (`local:FN_CODE:PARAM_COUNT`).
pub use crate::discovery::spec::LOCAL_HOST;

/// Most concurrent handles of one in-process NAA.
const MAX_CONNECTIONS: usize = 256;

/// The process's in-process NAAs.
struct State {
    /// The kernels the next in-process NAA starts with.
    kernels: KernelRegistry,
    /// The NAA new local handles connect to; `None` before the first, or after a
    /// registration changed the kernels.
    current: Option<SoftNaaHandle>,
    /// Earlier NAAs, still serving the handles connected to them (until the process ends).
    retired: Vec<SoftNaaHandle>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn state() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut guard = state();
    let st = guard.get_or_insert_with(|| State {
        kernels: KernelRegistry::builtin(),
        current: None,
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
        st.retired.extend(st.current.take());
        old
    })
}

/// Removes the local kernel for `code` (also a built-in one): handles created afterwards get
/// SOCKET_UNAVAIL for it.
pub fn remove_kernel(code: FunctionCode) -> Option<Arc<dyn Kernel>> {
    with_state(|st| {
        let old = st.kernels.remove(code);
        st.retired.extend(st.current.take());
        old
    })
}

/// The address of the in-process NAA, started now if it is not running.
pub fn address() -> Result<SocketAddr> {
    with_state(|st| {
        if let Some(naa) = &st.current {
            return Ok(naa.local_addr());
        }
        let config = SoftNaaConfig {
            max_connections: MAX_CONNECTIONS,
            ..SoftNaaConfig::default()
        };
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let naa = SoftNaa::bind(
            SoftTransport::default(),
            loopback,
            config,
            st.kernels.clone(),
        )?
        .spawn()?;
        let addr = naa.local_addr();
        tracing::debug!(%addr, "in-process NAA started (local mode)");
        st.current = Some(naa);
        Ok(addr)
    })
}

/// True if `addr` is one of this process's in-process NAAs.
pub fn is_local(addr: SocketAddr) -> bool {
    let guard = state();
    guard.as_ref().is_some_and(|st| {
        st.current
            .iter()
            .chain(&st.retired)
            .any(|naa| naa.local_addr() == addr)
    })
}
