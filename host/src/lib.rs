//! # naaice
//!
//! Host side of the NAAICE stack: offload RPCs to network-attached accelerators (NAAs).
//!
//! * [`Naa`] (AP2, the middleware API): create / invoke / test / wait / finalize, MPI-like and
//!   non-blocking; NAAs found through `NAA_SPEC` ([`spec`]), shared out among MPI ranks and
//!   failed over ([`select`]); the environment variables in one place ([`environment`]).
//!   Many handles progressed together in one thread ([`naa_set`]: `wait_any`, `wait_all`,
//!   `test_any`, `test_all`), and the RPC as a `Future` for any
//!   executor ([`rpc_future`]).
//! * [`Connection`] (AP1, the low-level API): connection, regions, MRSP and transfers step by
//!   step.
//! * [`local`]: local (lookaside) mode, the kernel in-process behind the same API
//!   (`NAA_SPEC=local:FN_CODE:PARAM_COUNT`).
//! * [`swnaa`]: the software NAA, a server that behaves like the FPGA NAA.
//! * [`transport`]: the RC queue-pair seam, with the software transport (RC semantics over TCP),
//!   the verbs transport (feature `verbs`) and [`transport::AnyTransport`], either one chosen
//!   at run time.
//! * [`memory`]: buffers that a transport may read and write like a NIC does, safely.
//!
//! The protocol itself (MRSP, immediates, state machines) is `naaice-core`, re-exported as
//! [`core`]. The crate is layered, each layer using only those below it:
//!
//! * base (`host/src/base`): [`memory`], [`units`], clocks; and the errors;
//! * [`transport`]: the queue-pair seam and its transports;
//! * the driver (private `driver` module): runs one connection, client or server: it owns the
//!   endpoint, the core machine, the message buffers and the region memory;
//! * [`discovery`]: where the NAAs are ([`spec`]), which one a handle uses ([`select`]), the
//!   environment variables ([`environment`]);
//! * [`swnaa`]: the software NAA (and [`local`] mode's in-process one);
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

pub use client::{connection, naa, naa_set, rpc_future, stats};
pub use discovery::{environment, select, spec};
pub use swnaa::local;
pub use transport::waiting;

pub use client::pipeline::{Pipeline, PipelineReport};
pub use connection::Connection;
pub use error::{Error, Result};
pub use memory::{Buffer, BufferGuard};
pub use naa::{Call, Naa, NaaOptions, Param, Status};
pub use naaice_core as core;
