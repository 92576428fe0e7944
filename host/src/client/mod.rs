//! The client APIs: AP1, a connection driven step by step ([`connection`]), and AP2, the
//! middleware handle ([`naa`]) with its sets ([`naa_set`]) and futures ([`rpc_future`]), and
//! large offloads that overlap transfer and compute ([`pipeline`]).

mod arming;
pub mod connection;
pub mod naa;
pub mod naa_set;
pub mod pipeline;
pub mod rpc_future;
pub mod stats;
