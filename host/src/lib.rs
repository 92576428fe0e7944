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
//! [`core`]. Each connection, client or server, is run by one driver (the private `driver`
//! module): it owns the endpoint, the core machine, the message buffers and the region memory;
//! [`Connection`], [`Naa`] and the software NAA's workers are views over it.
#![deny(unsafe_code)]

pub mod cli;
mod clock;
pub mod connection;
mod driver;
pub mod environment;
mod error;
pub mod local;
#[allow(unsafe_code)]
pub mod memory;
pub mod naa;
pub mod naa_set;
mod readiness;
pub mod rpc_future;
pub mod select;
pub mod spec;
pub mod swnaa;
mod throttle;
pub mod transport;
pub mod units;
pub mod waiting;

pub use connection::Connection;
pub use error::{Error, Result};
pub use memory::{Buffer, BufferGuard};
pub use naa::{Call, Naa, NaaOptions, Param, Status};
pub use naaice_core as core;
