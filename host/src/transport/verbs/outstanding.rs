//! The work requests a queue pair has outstanding: the tags they are posted under, how many
//! fit, and the completions they produce.
//!
//! Only the last send of each posted list is signaled (one CQE per list instead of one per
//! request). The send queue completes in order, so a signaled completion, or any error or
//! flush completion (those are generated for unsignaled requests too), means that every
//! earlier unsignaled request completed successfully: their completions are made up here, and
//! the seam keeps its rule that every posted work request completes exactly once. The slots
//! of unsignaled requests are only free again after such a completion, which the accounting
//! here mirrors, so the send queue never overflows.
//!
//! Work requests are posted with tags instead of the caller's ids: the send tags have the top
//! bit set, receive tags not, so every completion (also an error one, whose opcode verbs
//! leaves undefined) is attributed to its queue and request.

use std::collections::VecDeque;

use crate::transport::{Completion, WcOpcode, WcStatus};

/// Top bit of a send tag.
const SEND_TAG: u64 = 1 << 63;

#[derive(Clone, Copy, Debug)]
struct Slot {
    seq: u64,
    wr_id: u64,
    opcode: WcOpcode,
}

/// The outstanding send and receive work requests of one queue pair.
#[derive(Debug)]
pub(super) struct Outstanding {
    sends: VecDeque<Slot>,
    recvs: VecDeque<Slot>,
    next_send: u64,
    next_recv: u64,
    max_send: usize,
    max_recv: usize,
}

impl Outstanding {
    /// Room for `max_send` sends and `max_recv` receives (allocated here, once).
    pub(super) fn new(max_send: usize, max_recv: usize) -> Self {
        Self {
            sends: VecDeque::with_capacity(max_send),
            recvs: VecDeque::with_capacity(max_recv),
            next_send: 0,
            next_recv: 0,
            max_send,
            max_recv,
        }
    }

    /// How many more sends fit.
    pub(super) fn send_room(&self) -> usize {
        self.max_send - self.sends.len()
    }

    /// How many more receives fit.
    pub(super) fn recv_room(&self) -> usize {
        self.max_recv - self.recvs.len()
    }

    /// The tag the `i`-th send posted from now on goes under.
    pub(super) fn send_tag(&self, i: usize) -> u64 {
        SEND_TAG | (self.next_send.wrapping_add(i as u64) & !SEND_TAG)
    }

    /// The tag the next receive goes under.
    pub(super) fn recv_tag(&self) -> u64 {
        self.next_recv & !SEND_TAG
    }

    /// Records the next send as posted (under [`Outstanding::send_tag`]`(0)`).
    pub(super) fn sent(&mut self, wr_id: u64, opcode: WcOpcode) {
        debug_assert!(self.send_room() > 0);
        let seq = self.send_tag(0) & !SEND_TAG;
        self.next_send = self.next_send.wrapping_add(1);
        self.sends.push_back(Slot { seq, wr_id, opcode });
    }

    /// Records the next receive as posted (under [`Outstanding::recv_tag`]).
    pub(super) fn received(&mut self, wr_id: u64) {
        debug_assert!(self.recv_room() > 0);
        let seq = self.recv_tag();
        self.next_recv = self.next_recv.wrapping_add(1);
        self.recvs.push_back(Slot {
            seq,
            wr_id,
            opcode: WcOpcode::Recv,
        });
    }

    /// Turns one completion from the CQ (its `wr_id` a tag) into the caller's completions,
    /// appended to `out`: those of the unsignaled sends it implies, then its own. A completion
    /// of nothing outstanding is dropped (and logged).
    pub(super) fn complete(&mut self, mut wc: Completion, out: &mut VecDeque<Completion>) {
        let tag = wc.wr_id;
        if tag & SEND_TAG == 0 {
            // Receives complete in order: the slot is the first unless the provider says
            // otherwise.
            let slot = if self.recvs.front().is_some_and(|s| s.seq == tag) {
                self.recvs.pop_front()
            } else {
                let index = self.recvs.iter().position(|s| s.seq == tag);
                index.and_then(|i| self.recvs.remove(i))
            };
            let Some(slot) = slot else {
                return tracing::warn!(tag, "verbs: completion of no outstanding receive");
            };
            wc.wr_id = slot.wr_id;
            if wc.status != WcStatus::Success {
                wc.opcode = WcOpcode::Recv;
            }
            return out.push_back(wc);
        }
        let seq = tag & !SEND_TAG;
        if !self.sends.iter().any(|s| s.seq == seq) {
            return tracing::warn!(tag, "verbs: completion of no outstanding send");
        }
        while let Some(slot) = self.sends.pop_front() {
            if slot.seq == seq {
                wc.wr_id = slot.wr_id;
                wc.opcode = slot.opcode;
                return out.push_back(wc);
            }
            // Unsignaled and before it in the send queue: completed successfully.
            out.push_back(Completion {
                wr_id: slot.wr_id,
                status: WcStatus::Success,
                opcode: slot.opcode,
                byte_len: 0,
                imm: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cqe(tag: u64, status: WcStatus, opcode: WcOpcode) -> Completion {
        Completion {
            wr_id: tag,
            status,
            opcode,
            byte_len: 0,
            imm: None,
        }
    }

    /// Posts `ids` as one list of writes; returns the tag of the last (signaled) one.
    fn post_list(o: &mut Outstanding, ids: &[u64]) -> u64 {
        let last = o.send_tag(ids.len() - 1);
        for &id in ids {
            o.sent(id, WcOpcode::RdmaWrite);
        }
        last
    }

    /// Posts one receive per id; returns their tags.
    fn post_recvs(o: &mut Outstanding, ids: &[u64]) -> Vec<u64> {
        ids.iter()
            .map(|&id| {
                let t = o.recv_tag();
                o.received(id);
                t
            })
            .collect()
    }

    #[test]
    fn the_signaled_completion_completes_the_whole_list_in_order() {
        let mut o = Outstanding::new(8, 8);
        let last = post_list(&mut o, &[10, 11, 12]);
        assert_eq!(o.send_room(), 5);
        let mut out = VecDeque::new();
        o.complete(cqe(last, WcStatus::Success, WcOpcode::RdmaWrite), &mut out);
        let ids: Vec<_> = out.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect();
        assert_eq!(
            ids,
            [10, 11, 12].map(|id| (id, WcStatus::Success, WcOpcode::RdmaWrite))
        );
        assert_eq!(o.send_room(), 8, "every slot free again");
    }

    #[test]
    fn an_error_completes_the_earlier_requests_and_flushes_report_the_rest() {
        let mut o = Outstanding::new(8, 8);
        let first = o.send_tag(0);
        let last = post_list(&mut o, &[1, 2, 3, 4]);
        let mut out = VecDeque::new();
        // Request 2 fails (its CQE's opcode is undefined: the slot's is used), 3 and 4 flush.
        o.complete(
            cqe(first + 1, WcStatus::RemoteAccess, WcOpcode::Recv),
            &mut out,
        );
        o.complete(cqe(first + 2, WcStatus::WrFlush, WcOpcode::Recv), &mut out);
        o.complete(cqe(last, WcStatus::WrFlush, WcOpcode::Recv), &mut out);
        let got: Vec<_> = out.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect();
        let w = WcOpcode::RdmaWrite;
        assert_eq!(
            got,
            [
                (1, WcStatus::Success, w),
                (2, WcStatus::RemoteAccess, w),
                (3, WcStatus::WrFlush, w),
                (4, WcStatus::WrFlush, w)
            ]
        );
        assert_eq!(o.send_room(), 8);
    }

    #[test]
    fn receives_and_sends_are_told_apart_by_their_tags() {
        let mut o = Outstanding::new(4, 4);
        // The caller may use the same id for a send and a receive.
        let r = o.recv_tag();
        o.received(7);
        let s = o.send_tag(0);
        o.sent(7, WcOpcode::Send);
        assert_ne!(r, s);
        assert_eq!((o.send_room(), o.recv_room()), (3, 3));
        let mut out = VecDeque::new();
        // A flushed receive: its opcode is set to Recv whatever the CQE said.
        o.complete(cqe(r, WcStatus::WrFlush, WcOpcode::Send), &mut out);
        o.complete(cqe(s, WcStatus::Success, WcOpcode::Send), &mut out);
        let got: Vec<_> = out.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect();
        assert_eq!(
            got,
            [
                (7, WcStatus::WrFlush, WcOpcode::Recv),
                (7, WcStatus::Success, WcOpcode::Send)
            ]
        );
        assert_eq!((o.send_room(), o.recv_room()), (4, 4));
    }

    #[test]
    fn completions_of_nothing_outstanding_are_dropped() {
        let mut o = Outstanding::new(4, 4);
        let mut out = VecDeque::new();
        o.complete(
            cqe(o.send_tag(0), WcStatus::Success, WcOpcode::Send),
            &mut out,
        );
        o.complete(
            cqe(o.recv_tag(), WcStatus::Success, WcOpcode::Recv),
            &mut out,
        );
        assert!(out.is_empty());
        // A stale send tag does not complete later requests.
        let stale = o.send_tag(0);
        let last = post_list(&mut o, &[1]);
        assert_eq!(stale, last);
        post_list(&mut o, &[2]);
        o.complete(cqe(stale, WcStatus::Success, WcOpcode::Send), &mut out);
        o.complete(cqe(stale, WcStatus::Success, WcOpcode::Send), &mut out);
        assert_eq!(out.len(), 1, "the second one is of nothing outstanding");
        assert_eq!(o.send_room(), 3);
    }

    #[test]
    fn receives_complete_in_order_by_their_tags() {
        let mut o = Outstanding::new(4, 4);
        let tags = post_recvs(&mut o, &[100, 101, 102]);
        assert_eq!(o.recv_room(), 1);
        let mut out = VecDeque::new();
        for &t in &tags {
            o.complete(
                cqe(t, WcStatus::Success, WcOpcode::RecvRdmaWithImm),
                &mut out,
            );
        }
        let ids: Vec<_> = out.iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, [100, 101, 102]);
        assert_eq!(o.recv_room(), 4);
    }

    #[test]
    fn a_receive_completed_out_of_order_is_still_attributed_by_its_tag() {
        let mut o = Outstanding::new(4, 4);
        let tags = post_recvs(&mut o, &[200, 201, 202]);
        let mut out = VecDeque::new();
        for &t in &[tags[1], tags[0], tags[2], tags[1]] {
            o.complete(cqe(t, WcStatus::WrFlush, WcOpcode::Send), &mut out);
        }
        let got: Vec<_> = out.iter().map(|c| (c.wr_id, c.opcode)).collect();
        let r = WcOpcode::Recv;
        assert_eq!(got, [(201, r), (200, r), (202, r)], "the repeat is dropped");
        assert_eq!(o.recv_room(), 4);
    }
}
