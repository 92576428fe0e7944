//! Finding NAAs: the syntax of `NAA_SPEC` ([`spec`]), choosing, reserving and failing over
//! among its entries ([`select`]), and the environment variables that configure it all
//! ([`environment`]), with the check of log filters ([`log_filter`]).

pub mod environment;
pub mod log_filter;
pub mod select;
pub mod spec;
