//! # naaice
//!
//! Host side of the NAAICE stack: offload RPCs to network-attached accelerators (NAAs).
//!
//! * [`Naa`] (AP2, the middleware API): create / invoke / test / wait / finalize, MPI-like and
//!   non-blocking; NAAs found through `NAA_SPEC` ([`discovery::spec`]), shared out among MPI ranks and
//!   failed over ([`discovery::select`]); the environment variables in one place
//!   ([`discovery::environment`]).
//!   Many handles progressed together in one thread ([`client::naa_set`]: `wait_any`, `wait_all`,
//!   `test_any`, `test_all`), and the RPC as a `Future` for any
//!   executor ([`client::rpc_future`]).
//! * [`Connection`] (AP1, the low-level API): connection, regions, MRSP and transfers step by
//!   step.
//! * [`swnaa::local`]: local (lookaside) mode, the kernel in-process behind the same API
//!   (`NAA_SPEC=local:FN_CODE:PARAM_COUNT`), reached without sockets.
//! * [`swnaa`]: the software NAA, a server that behaves like the FPGA NAA.
//! * [`transport`]: the RC queue-pair seam, with the software transport (RC semantics over TCP),
//!   the verbs transport (feature `verbs`), the in-process transport of local mode
//!   ([`transport::local`]) and [`transport::AnyTransport`], the transport chosen at run time.
//! * [`memory`]: buffers that a transport may read and write like a NIC does, safely.
//!
//! The protocol itself (MRSP, immediates, state machines) is `naaice-core`, re-exported as
//! [`core`]. The crate is layered, each layer using only those below it:
//!
//! * base (`host/src/base`): [`memory`], [`units`], clocks; and the errors;
//! * [`transport`]: the queue-pair seam and its transports;
//! * the driver (private `driver` module): runs one connection, client or server: it owns the
//!   endpoint, the core machine, the message buffers and the region memory;
//! * [`discovery`]: where the NAAs are ([`discovery::spec`]), which one a handle uses
//!   ([`discovery::select`]), the environment variables ([`discovery::environment`]);
//! * [`swnaa`]: the software NAA (and [`swnaa::local`] mode's in-process one);
//! * [`client`]: the APIs, AP1 ([`Connection`]) and AP2 ([`Naa`] and its sets and futures).
#![deny(unsafe_code)]

mod base;
pub mod client;
pub mod discovery;
mod driver;
mod error;
pub mod swnaa;
pub mod transport;

use base::{clock, throttle};
pub use base::{memory, units};

/// The old flat paths of the modules, kept for one release: `naaice::client::naa`,
/// `naaice::discovery::spec`, `naaice::swnaa::local`, `naaice::transport::waiting` (…) are
/// the modules' paths. Importing an old path (`use naaice::spec;`) warns.
macro_rules! deprecated_path {
    ($($name:ident => $new:literal $path:path),* $(,)?) => {$(
        #[doc(hidden)]
        #[deprecated(since = "0.3.0", note = $new)]
        pub mod $name {
            pub use $path::*;
        }
    )*};
}

deprecated_path! {
    connection => "use naaice::client::connection" crate::client::connection,
    naa => "use naaice::client::naa" crate::client::naa,
    naa_set => "use naaice::client::naa_set" crate::client::naa_set,
    rpc_future => "use naaice::client::rpc_future" crate::client::rpc_future,
    stats => "use naaice::client::stats" crate::client::stats,
    environment => "use naaice::discovery::environment" crate::discovery::environment,
    select => "use naaice::discovery::select" crate::discovery::select,
    spec => "use naaice::discovery::spec" crate::discovery::spec,
    local => "use naaice::swnaa::local" crate::swnaa::local,
    waiting => "use naaice::transport::waiting" crate::transport::waiting,
}

pub use client::connection::Connection;
pub use client::naa::{Call, Naa, NaaOptions, Param, Status};
pub use client::pipeline::{Pipeline, PipelineReport};
pub use error::{Error, Result};
pub use memory::{Buffer, BufferGuard};
pub use naaice_core as core;
