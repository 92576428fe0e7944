//! Remote keys: unpredictable, never 0, never one that is in use.
//!
//! An rkey is the only thing that stops a peer from writing into another connection's
//! regions, so keys come from a cryptographically secure generator (`rand_core::CryptoRng`,
//! seeded from the board's entropy source), never from a counter.

use rand_core::CryptoRng;

/// How many draws [`RkeyGen::next_key`] makes before it gives up (a collision with a live key
/// has probability below 2⁻²⁰ per draw).
const ATTEMPTS: u32 = 8;

/// Generates rkeys from a secure random generator.
#[derive(Debug)]
pub struct RkeyGen<R> {
    rng: R,
}

impl<R: CryptoRng> RkeyGen<R> {
    /// A generator drawing from `rng`.
    pub const fn new(rng: R) -> Self {
        Self { rng }
    }

    /// A fresh rkey for which `in_use` is false, or `None` if none was found.
    pub fn next_key(&mut self, in_use: impl Fn(u32) -> bool) -> Option<u32> {
        (0..ATTEMPTS)
            .map(|_| self.rng.next_u32())
            .find(|&k| k != 0 && !in_use(k))
    }
}
