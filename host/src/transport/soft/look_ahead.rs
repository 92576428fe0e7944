//! Whether a look for completions just after a post reads the socket, or only takes what is
//! already queued. A look just before a likely wait (the client's first look after posting an
//! RPC, the NAA's look after posting an answer) mostly finds nothing when the peer runs on a
//! core or a host of its own: the wait that follows reads anyway (it sleeps in the receive),
//! so reading first only costs a system call. On a busy or a single CPU the peer often answers
//! before this thread looks again, and reading then saves the wait. [`LookAhead`] learns which
//! case holds; the endpoint asks it for the first look after each post.

/// Every this many looks ahead that take only what is queued, one reads, to notice when reads
/// start to find something.
const PROBE_EVERY: u8 = 16;
/// Looks ahead that read and found something, of the last 8, for them to go on reading.
const READ_WHILE_FOUND: u32 = 4;

/// Whether looks ahead read: while at least [`READ_WHILE_FOUND`] of the last 8 that read found
/// something; otherwise one in [`PROBE_EVERY`] reads.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LookAhead {
    /// The last 8 reading looks, newest in bit 0: found something.
    found: u8,
    /// Looks that took only what was queued since the last that read.
    skipped: u8,
}

impl LookAhead {
    /// True if this look ahead reads (it then reports what it found with
    /// [`LookAhead::learn`]).
    pub(crate) fn reads(&mut self) -> bool {
        if self.found.count_ones() >= READ_WHILE_FOUND {
            return true;
        }
        self.skipped += 1;
        if self.skipped >= PROBE_EVERY {
            self.skipped = 0;
            return true;
        }
        false
    }

    /// What a look ahead that read found.
    pub(crate) fn learn(&mut self, found: bool) {
        self.found = (self.found << 1) | u8::from(found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `n` looks ahead whose reads find something while `found` says so; how many read.
    fn reads(ahead: &mut LookAhead, n: usize, found: bool) -> usize {
        (0..n)
            .filter(|_| {
                let reads = ahead.reads();
                if reads {
                    ahead.learn(found);
                }
                reads
            })
            .count()
    }

    #[test]
    fn looks_ahead_read_while_reads_find_something() {
        let mut ahead = LookAhead::default();
        // Reads find nothing: one look in PROBE_EVERY reads.
        assert_eq!(reads(&mut ahead, 160, false), 10);
        // They start to find something: the probes notice, and every look reads.
        let probes_to_notice = usize::from(PROBE_EVERY) * READ_WHILE_FOUND as usize;
        assert!(reads(&mut ahead, probes_to_notice, true) >= READ_WHILE_FOUND as usize);
        assert_eq!(reads(&mut ahead, 100, true), 100);
        // They find nothing again: within 5 looks reading stops, back to probes.
        assert!(reads(&mut ahead, 5, false) <= 5);
        assert_eq!(reads(&mut ahead, 160, false), 10);
    }
}
