//! End-to-end tests across the naaice crates live in `tests/tests/`; this library holds
//! nothing but their shared fixtures.
