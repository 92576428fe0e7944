//! The low-level API (AP1) for C: the reference's `naaice.h` functions with its signatures and
//! its 0 / -1 return convention (spec section 7), over [`naaice::Connection`].
//!
//! Call order (as in the reference's programs): `naaice_init_communication_context`,
//! `naaice_setup_connection`, `naaice_set_input_mr` / `_output_mr` / `_singlesend_mr`
//! (optionally `naaice_set_internal_mrs`, `naaice_set_immediate`), `naaice_register_mrs`,
//! optionally `naaice_set_bytes_to_send`, `naaice_do_mrsp` (or `naaice_init_mrsp` and
//! polling), per RPC `naaice_do_data_transfer` (or `naaice_init_data_transfer` and polling),
//! `naaice_disconnect_and_cleanup`.
//!
//! The context is opaque: the pointer is an identifier, never dereferenced, so a stale or
//! forged context is an error, not undefined behaviour. Programs read what the reference keeps
//! in its fields through `naaice_get_state`, `naaice_get_naa_returncode` and
//! `naaice_get_bytes_received`. The parameter memory stays the program's: it must stay
//! allocated until `naaice_disconnect_and_cleanup` and must not be touched while an RPC is
//! in flight. The transport is chosen by `NAAICE_TRANSPORT` (`auto`, `soft` or `verbs`), the RPC
//! deadline by `NAAICE_RPC_TIMEOUT` (seconds, default 3600), like for the AP2 functions.
//! Calls on one context are serialised; different contexts are independent. The reason for a
//! failure goes to stderr and to `naa_last_error()`.
//!
//! Also provided: `naaice_poll_cq_busy` (the blocking wait, polling in a loop) and
//! `naaice_poll_and_handle_connection_event` (runs the whole connection setup on its first
//! call).
//!
//! Left out (no C declaration; `naaice.h` lists each with its reason, and
//! `tests/reference_names` checks the list against the reference's names): the rdma_cm event
//! handlers (`naaice_poll_connection_event`, `naaice_handle_*`) and the single verbs steps
//! (`naaice_init_rdma_resources`, `naaice_handle_work_completion`, `naaice_send_message`,
//! `naaice_write_data`, `naaice_post_recv_mrsp`, `naaice_post_recv_data`): they take
//! `rdma_cm_event` / `ibv_wc` structures or post single work requests, which the protocol
//! machine does itself (on either transport). Also `naaice_set_parameter_mrs` (arbitrary
//! requested NAA addresses; the layout here is always the reference's sequential one from
//! `addr_offset`).

mod arguments;
mod session;
pub mod types;

use std::ffi::{c_char, c_int, c_uint};
use std::sync::{Mutex, MutexGuard};

use naaice::core::Phase;
use naaice::transport::{AnyEndpoint, AnyTransport};

use crate::ap1::types::{MAX_MRS, naaice_communication_context, naaice_communication_state};
use crate::boundary::{FAILURE, SUCCESS, fail, guard};
use crate::error::Failure;
use crate::handles::{Handles, as_ptr, id_of};
use crate::transport::transport_from_env;
use arguments::{check_size, internal_layout, make_setup, read_array};
use session::{Flags, Session, Setup};

/// A connected session, on the transport `NAAICE_TRANSPORT` chose.
type Link = Box<Session<AnyEndpoint>>;

/// One AP1 context.
struct Context {
    transport: AnyTransport,
    setup: Setup,
    /// `None` until `naaice_setup_connection`.
    link: Option<Link>,
}

impl Context {
    fn phase(&self) -> Phase {
        match &self.link {
            Some(l) => l.phase(),
            None => Phase::Init,
        }
    }

    /// The last finished RPC.
    fn last_rpc(&self) -> Result<naaice::core::machine::RpcResult, Failure> {
        self.link
            .as_ref()
            .and_then(|l| l.last())
            .ok_or_else(|| Failure::state("no RPC has finished on this context"))
    }

    fn link(&mut self) -> Result<&mut Link, Failure> {
        Ok(self.linked()?.0)
    }

    /// The connection and the regions' set-up it works on.
    fn linked(&mut self) -> Result<(&mut Link, &Setup), Failure> {
        let link = self
            .link
            .as_mut()
            .ok_or_else(|| Failure::state("not connected: call naaice_setup_connection first"))?;
        Ok((link, &self.setup))
    }

    /// Fails once the MRSP has started (regions and flags are fixed from then on).
    fn before_mrsp(&self, what: &str) -> Result<(), Failure> {
        let started = self.link.as_ref().is_some_and(|l| l.mrsp_started());
        if started {
            return Err(Failure::state(format!(
                "{what} are fixed once the MRSP started (naaice_init_mrsp / naaice_do_mrsp)"
            )));
        }
        Ok(())
    }

    fn param(&self, idx: usize) -> Result<(), Failure> {
        if idx >= self.setup.params.len() {
            return Err(Failure::from(format!(
                "region index {idx} is out of range ({} parameters)",
                self.setup.params.len()
            )));
        }
        Ok(())
    }

    fn set_flag(&mut self, idx: c_uint, set: impl Fn(&mut Flags)) -> Result<(), Failure> {
        let idx = idx as usize;
        self.param(idx)?;
        self.before_mrsp("region flags")?;
        set(&mut self.setup.flags[idx]);
        Ok(())
    }
}

static CONTEXTS: Handles<Mutex<Context>> = Handles::new();

/// Number of live AP1 contexts; for leak tests.
pub(crate) fn live_contexts() -> usize {
    CONTEXTS.len()
}

fn lock(c: &Mutex<Context>) -> MutexGuard<'_, Context> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `body` on the live context `ctx` as export `name`.
fn with_context(
    name: &'static str,
    ctx: *const naaice_communication_context,
    body: impl FnOnce(&mut Context) -> Result<(), Failure>,
) -> c_int {
    guard(name, FAILURE, || {
        if ctx.is_null() {
            return fail(name, "comm_ctx is NULL");
        }
        let Some(c) = CONTEXTS.get(id_of(ctx)) else {
            return fail(
                name,
                "unknown comm_ctx (cleaned up, or never created by naaice_init_communication_context)",
            );
        };
        let mut c = lock(&c);
        match body(&mut c) {
            Ok(()) => SUCCESS,
            Err(f) => fail(name, f),
        }
    })
}

/// Creates a context for `params_amount` parameter regions (`params[i]`, `param_sizes[i]`
/// bytes) and `internal_mr_amount` internal regions (NAA-only memory of
/// `internal_mr_sizes[i]` bytes) of function `fncode` on the NAA at `remote_address`:`port`,
/// optionally from `local_address`. Requested NAA addresses start at `addr_offset`
/// (spec section 2.5). Does not connect yet (`naaice_setup_connection` does).
///
/// Returns 0 and sets `*comm_ctx`; -1 with `*comm_ctx` set to NULL on failure.
///
/// Fixes (spec section 9): function codes must be 1-127 (the 0x80 bit is the start-RPC
/// marker); at most 32 regions in all (`MAX_MRS`; the reference does not check, D-23); NULL
/// or overlapping parameters and sizes of 0 or 4 GiB and more are errors; nothing leaks on
/// failure (D-23). Addresses are resolved here, so a wrong address fails here.
///
/// # Safety
/// `comm_ctx` must be NULL or writable. `param_sizes` and `params` must be NULL or hold
/// `params_amount` elements, `internal_mr_sizes` `internal_mr_amount`. Each `params[i]` must
/// stay valid for `param_sizes[i]` bytes until `naaice_disconnect_and_cleanup` and must not be
/// accessed while an RPC is in flight. The addresses must be NULL or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_init_communication_context(
    comm_ctx: *mut *mut naaice_communication_context,
    addr_offset: u64,
    param_sizes: *mut usize,
    params: *mut *mut c_char,
    params_amount: c_uint,
    internal_mr_amount: c_uint,
    internal_mr_sizes: *mut usize,
    fncode: u8,
    local_address: *const c_char,
    remote_address: *const c_char,
    port: u16,
) -> c_int {
    const NAME: &str = "naaice_init_communication_context";
    guard(NAME, FAILURE, || {
        if comm_ctx.is_null() || !comm_ctx.is_aligned() {
            return fail(NAME, "comm_ctx is NULL or not aligned");
        }
        // SAFETY: non-null, aligned, writable by the caller's guarantee.
        unsafe { comm_ctx.write(std::ptr::null_mut()) };
        // SAFETY: forwarded caller guarantees.
        let setup = unsafe {
            make_setup(
                addr_offset,
                param_sizes,
                params,
                params_amount,
                internal_mr_amount,
                internal_mr_sizes,
                fncode,
                local_address,
                remote_address,
                port,
            )
        };
        let context = setup.and_then(|setup| {
            let transport = transport_from_env().map_err(Failure::config)?;
            Ok(Context {
                transport,
                setup,
                link: None,
            })
        });
        match context {
            Ok(c) => {
                let id = CONTEXTS.insert(Mutex::new(c));
                // SAFETY: as above.
                unsafe { comm_ctx.write(as_ptr(id)) };
                SUCCESS
            }
            Err(f) => fail(NAME, f),
        }
    })
}

/// Connects to the NAA (blocking; at most 10 s). State CONNECTED afterwards.
///
/// Fixes: a failed setup returns -1 and leaves the context valid for
/// `naaice_disconnect_and_cleanup` (the reference may free it internally and keep using it,
/// D-09).
///
/// # Safety
/// `comm_ctx` may be anything; only contexts from `naaice_init_communication_context` are
/// accepted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_setup_connection(
    comm_ctx: *mut naaice_communication_context,
) -> c_int {
    with_context("naaice_setup_connection", comm_ctx, |c| {
        if c.link.is_some() {
            return Err(Failure::state("already connected"));
        }
        let link = Box::new(Session::connect(&c.transport, &c.setup)?);
        c.link = Some(link);
        Ok(())
    })
}

/// Marks parameter region `input_mr_idx` as input: written to the NAA with every RPC.
/// Before the MRSP; idempotent.
///
/// Fixes: an index out of range or a call after the MRSP is an error (the reference ignores
/// late flags).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_set_input_mr(
    comm_ctx: *mut naaice_communication_context,
    input_mr_idx: c_uint,
) -> c_int {
    with_context("naaice_set_input_mr", comm_ctx, |c| {
        c.set_flag(input_mr_idx, |f| f.input = true)
    })
}

/// Marks parameter region `output_mr_idx` as output: written back by the NAA after every RPC.
/// Before the MRSP; idempotent. A region may be input and output (in place).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_set_output_mr(
    comm_ctx: *mut naaice_communication_context,
    output_mr_idx: c_uint,
) -> c_int {
    with_context("naaice_set_output_mr", comm_ctx, |c| {
        c.set_flag(output_mr_idx, |f| f.output = true)
    })
}

/// Marks parameter region `singlesend_mr_idx` as single-send: an input written with the
/// first RPC only (the NAA keeps it for later RPCs; spec section 3.3). Implies input. Before
/// the MRSP.
///
/// Fixes: when every input is single-send, later RPCs still reach the NAA (the reference
/// posts an uninitialised work request, D-08).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_set_singlesend_mr(
    comm_ctx: *mut naaice_communication_context,
    singlesend_mr_idx: c_uint,
) -> c_int {
    with_context("naaice_set_singlesend_mr", comm_ctx, |c| {
        c.set_flag(singlesend_mr_idx, |f| {
            f.single_send = true;
            f.input = true;
        })
    })
}

/// Replaces the internal regions (NAA-only memory, never transferred) with `n_internal_mrs`
/// regions of `sizes[i]` bytes. Before the MRSP.
///
/// `addrs` are the requested NAA addresses; this library always uses the reference's
/// sequential layout (internal regions first from `addr_offset`, each on a new 4 KiB page,
/// spec section 2.5), so `addrs` must be NULL or equal to that layout. Otherwise it is an error
/// rather than a silently different request.
///
/// Fixes: the previous table is freed (the reference leaks it); at most 32 regions in all.
///
/// # Safety
/// As for `naaice_setup_connection`; `addrs` and `sizes` must be NULL or hold
/// `n_internal_mrs` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_set_internal_mrs(
    comm_ctx: *mut naaice_communication_context,
    n_internal_mrs: c_uint,
    addrs: *mut u64,
    sizes: *mut usize,
) -> c_int {
    with_context("naaice_set_internal_mrs", comm_ctx, |c| {
        c.before_mrsp("internal regions")?;
        let n = n_internal_mrs as usize;
        if n + c.setup.params.len() > MAX_MRS as usize {
            return Err(Failure::from(format!(
                "{} parameter and {n} internal regions (at most {MAX_MRS} in all)",
                c.setup.params.len()
            )));
        }
        // SAFETY: forwarded caller guarantee.
        let sizes = unsafe { read_array(sizes, n, "sizes")? };
        let sizes = sizes
            .iter()
            .enumerate()
            .map(|(i, &s)| check_size(s, &format!("internal region {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        if !addrs.is_null() {
            // SAFETY: forwarded caller guarantee.
            let given = unsafe { read_array(addrs, n, "addrs")? };
            let layout = internal_layout(c.setup.addr_offset, &sizes);
            if given != layout {
                return Err(Failure::from(format!(
                    "requested internal addresses {given:#x?} differ from the sequential \
                     layout {layout:#x?} (addr_offset first, 4 KiB pages; pass NULL to use it)"
                )));
            }
        }
        c.setup.internal = sizes;
        Ok(())
    })
}

/// Registers the parameter regions for the transport (pins them for RDMA). After
/// `naaice_setup_connection`; `naaice_init_mrsp` / `naaice_do_mrsp` register themselves if
/// the program did not.
///
/// Fixes: before `naaice_setup_connection` it is an error, not a crash on a missing
/// protection domain (spec section 7).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_register_mrs(comm_ctx: *mut naaice_communication_context) -> c_int {
    with_context("naaice_register_mrs", comm_ctx, |c| {
        let (link, setup) = c.linked()?;
        link.register(setup)
    })
}

/// Sets how many bytes of parameter region `mr_idx` later RPCs write: `number_bytes` in
/// 0..=size (0 is a zero-length write), or a negative value for the whole region (the
/// default). The MRSP always announces the whole region. Not while an RPC is in flight.
///
/// This follows the reference's code, not its header comment (which says 0 resets; D-27).
/// Fixes: also allowed before registration; a length over the region's size or an index out
/// of range is an error.
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_set_bytes_to_send(
    comm_ctx: *mut naaice_communication_context,
    mr_idx: c_int,
    number_bytes: c_int,
) -> c_int {
    with_context("naaice_set_bytes_to_send", comm_ctx, |c| {
        let idx = usize::try_from(mr_idx)
            .map_err(|_| Failure::from(format!("region index {mr_idx} is negative")))?;
        c.param(idx)?;
        let size = c.setup.params[idx].len();
        let len = match u32::try_from(number_bytes) {
            Err(_) => None,
            Ok(n) if n as usize > size => {
                return Err(Failure::from(format!(
                    "{n} bytes to send from region {idx} of {size} bytes"
                )));
            }
            Ok(n) => Some(n),
        };
        if let Some(link) = c.link.as_mut() {
            link.apply_bytes_to_send(idx, len)?;
        }
        c.setup.bytes_to_send[idx] = len;
        Ok(())
    })
}

/// Sets the three user bytes of the RPC immediate (`imm_bytes[0..3]`, bits 8-31; the low
/// byte carries the function code; spec section 3.2). Default 0. Not while an RPC is in
/// flight.
///
/// # Safety
/// As for `naaice_setup_connection`; `imm_bytes` must be NULL or point to 3 readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_set_immediate(
    comm_ctx: *mut naaice_communication_context,
    imm_bytes: *mut u8,
) -> c_int {
    with_context("naaice_set_immediate", comm_ctx, |c| {
        // SAFETY: forwarded caller guarantee.
        let bytes = unsafe { read_array(imm_bytes.cast_const(), 3, "imm_bytes")? };
        let user = [bytes[0], bytes[1], bytes[2]];
        if let Some(link) = c.link.as_mut() {
            link.apply_immediate(user)?;
        }
        c.setup.user = user;
        Ok(())
    })
}

/// Starts the memory-region setup protocol (MRSP) without waiting: announces the regions
/// and their flags, requests the NAA's regions. Complete it by polling until the state is
/// at least MRSP_DONE (`naaice_get_state`).
///
/// Fixes: errors while posting are reported (the reference always returns 0, D-16).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_init_mrsp(comm_ctx: *mut naaice_communication_context) -> c_int {
    with_context("naaice_init_mrsp", comm_ctx, |c| {
        let (link, setup) = c.linked()?;
        link.init_mrsp(setup)
    })
}

/// Runs the MRSP to its end (blocking; the NAA must answer within 10 s). Starts it unless
/// `naaice_init_mrsp` already did.
///
/// Fixes: the NAA's answer is validated (the reference trusts its counts and sizes, D-04).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_do_mrsp(comm_ctx: *mut naaice_communication_context) -> c_int {
    with_context("naaice_do_mrsp", comm_ctx, |c| {
        let (link, setup) = c.linked()?;
        link.do_mrsp(setup)
    })
}

/// Starts one RPC without waiting: writes the inputs to the NAA (the last write carries the
/// immediate). Complete it by polling until the state is at least FINISHED.
///
/// Fixes: posting errors are reported (D-16); starting an RPC while one is in flight or
/// before the MRSP finished is an error.
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_init_data_transfer(
    comm_ctx: *mut naaice_communication_context,
) -> c_int {
    with_context("naaice_init_data_transfer", comm_ctx, |c| {
        c.link()?.init_transfer()
    })
}

/// Runs one RPC to its end (blocking, up to `NAAICE_RPC_TIMEOUT`): writes the inputs, waits
/// for the NAA's results. Returns 0 when the RPC finished, also if the NAA reported an error
/// code (as the reference; read it with `naaice_get_naa_returncode`).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_do_data_transfer(
    comm_ctx: *mut naaice_communication_context,
) -> c_int {
    with_context("naaice_do_data_transfer", comm_ctx, |c| {
        c.link()?.do_transfer()
    })
}

/// Makes progress on the MRSP or RPC in flight without blocking and updates the state.
/// Returns 0 whether or not anything finished; -1 if the connection failed (the state is then
/// ERROR).
///
/// Fixes: it never blocks (the reference waits up to 500 ms, D-14).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_poll_cq_nonblocking(
    comm_ctx: *mut naaice_communication_context,
) -> c_int {
    with_context("naaice_poll_cq_nonblocking", comm_ctx, |c| c.link()?.poll())
}

/// Blocks until the MRSP or RPC in flight finishes (or fails, or its deadline passes) and
/// updates the state; returns 0 at once when nothing is in flight.
///
/// Fixes: no SIGALRM handler and no alarm (D-13); the context is never torn down behind the
/// caller's back (D-09); with nothing in flight it does not block for an hour.
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_poll_cq_blocking(
    comm_ctx: *mut naaice_communication_context,
) -> c_int {
    with_context("naaice_poll_cq_blocking", comm_ctx, |c| c.link()?.wait())
}

/// Like `naaice_poll_cq_blocking`, but busy-waits: polls in a loop on the calling thread's
/// core instead of sleeping until the MRSP or RPC in flight finishes (or fails, or its
/// deadline passes). Returns 0 at once when nothing is in flight.
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_poll_cq_busy(comm_ctx: *mut naaice_communication_context) -> c_int {
    with_context("naaice_poll_cq_busy", comm_ctx, |c| c.link()?.spin())
}

/// Handles the connection setup's events: here the first call runs the whole setup, like
/// `naaice_setup_connection` (blocking; at most 10 s), so a loop calling it until the state is
/// at least CONNECTED ends after one call. Once connected it returns 0 and does nothing
/// (a lost connection is reported by the transfer and polling functions).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_poll_and_handle_connection_event(
    comm_ctx: *mut naaice_communication_context,
) -> c_int {
    with_context("naaice_poll_and_handle_connection_event", comm_ctx, |c| {
        if c.link.is_none() {
            c.link = Some(Box::new(Session::connect(&c.transport, &c.setup)?));
        }
        Ok(())
    })
}

/// Disconnects from the NAA and frees the context; the parameter memory may be freed
/// afterwards and `comm_ctx` must not be used again (a stale pointer is refused).
///
/// Fixes: frees everything, also after a failed setup or MRSP (the reference leaks the
/// context and its tables and crashes on regions never registered, D-22).
///
/// # Safety
/// As for `naaice_setup_connection`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_disconnect_and_cleanup(
    comm_ctx: *mut naaice_communication_context,
) -> c_int {
    const NAME: &str = "naaice_disconnect_and_cleanup";
    guard(NAME, FAILURE, || {
        if comm_ctx.is_null() {
            return fail(NAME, "comm_ctx is NULL");
        }
        let Some(c) = CONTEXTS.remove(id_of(comm_ctx)) else {
            return fail(
                NAME,
                "unknown comm_ctx (already cleaned up, or never created)",
            );
        };
        // Disconnect now; waits for a call in progress on another thread.
        let link = lock(&c).link.take();
        drop(link);
        SUCCESS
    })
}

/// Extension (the reference's programs read `comm_ctx->state`): the context's state (spec
/// section 4.1): INIT before `naaice_setup_connection`, MRSP_DONE after the MRSP, FINISHED
/// after each RPC, ERROR after a failure. An unknown context reads as ERROR, so a loop
/// `while (naaice_get_state(ctx) < FINISHED)` ends.
///
/// # Safety
/// `comm_ctx` may be anything; only live contexts are looked up.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_get_state(
    comm_ctx: *const naaice_communication_context,
) -> naaice_communication_state {
    let mut state = naaice_communication_state::ERROR;
    with_context("naaice_get_state", comm_ctx, |c| {
        state = c.phase().into();
        Ok(())
    });
    state
}

/// Extension (the reference's `comm_ctx->naa_returncode`): the NAA's return code of the last
/// finished RPC (0 success, 1 SOCKET_UNAVAIL, 2 KERNEL_TIMEOUT, 0x10-0x7F application
/// codes), or -1 if no RPC finished yet or the context is unknown.
///
/// # Safety
/// As for `naaice_get_state`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_get_naa_returncode(
    comm_ctx: *const naaice_communication_context,
) -> c_int {
    let mut code = FAILURE;
    with_context("naaice_get_naa_returncode", comm_ctx, |c| {
        code = c_int::try_from(c.last_rpc()?.status.get()).unwrap_or(c_int::MAX);
        Ok(())
    });
    code
}

/// Extension (the reference's `comm_ctx->bytes_received`): the length of the NAA's final
/// write in the last finished RPC (spec section 3.8), or -1 if no RPC finished yet or the
/// context is unknown.
///
/// # Safety
/// As for `naaice_get_state`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naaice_get_bytes_received(
    comm_ctx: *const naaice_communication_context,
) -> i64 {
    let mut bytes = -1;
    with_context("naaice_get_bytes_received", comm_ctx, |c| {
        bytes = i64::from(c.last_rpc()?.bytes_received);
        Ok(())
    });
    bytes
}
