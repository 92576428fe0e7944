//! # naaice-core
//!
//! The protocol core of the NAAICE stack, shared by the host library and the NAA firmware.
//! `no_std`, no allocation, no `unsafe`, no clock and no I/O.
//!
//! Layers, bottom up:
//! * [`wire`]: the MRSP messages (spec §2) as a checked zero-copy view ([`wire::mrsp::Packet`])
//!   and an owned representation ([`wire::mrsp::Repr`]); the 32-bit immediates of RDMA WRITE
//!   WITH IMMEDIATE (spec §3.2, §3.7) and the error-code enums.
//! * [`region`]: fixed-capacity region tables for both roles, with typed handles, flags,
//!   single-send bookkeeping, internal regions and the requested-address layout (spec §2.5).
//! * [`machine`]: the client and server (NAA) protocol state machines, sans-IO: the caller feeds
//!   [`machine::Input`]s and the current [`time::Instant`], and drains
//!   [`machine::ClientAction`]s / [`machine::ServerAction`]s ([`machine::Machine`]).
//!
//! The optional `defmt` feature implements `defmt::Format` for the public types; the
//! `testkit` feature adds the `testkit` module (test and fuzz support, with `std`).
#![no_std]
#![forbid(unsafe_code)]

#[cfg(feature = "testkit")]
extern crate std;

pub mod config;
pub mod machine;
pub mod region;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod time;
pub mod wire;

pub use machine::{
    Client, ClientAction, ClientConfig, Input, KernelSet, Machine, Phase, Placement, Post, RpcArgs,
    Server, ServerAction, ServerConfig,
};
pub use region::{ClientRegions, RegionFlags, RegionId, ServerRegions};
pub use time::Instant;
pub use wire::{FunctionCode, MrspErrorCode, ReturnCode};
