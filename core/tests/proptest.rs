//! Property tests of the wire codec, the immediates and the protocol machines.
//!
//! * `Repr::parse` and `Packet::new_checked` never panic, on arbitrary bytes and on bytes that
//!   start with a plausible header or are mutations of valid messages.
//! * `parse(emit(x)) == x` for every valid [`Repr`] (all three types, 0..=32 records, only the
//!   flag combinations the C client produces, internal records with address and rkey 0,
//!   requested addresses below 2^56).
//! * `emit(parse(b))` reproduces the message bytes of any `b` that parses, with the header
//!   padding zeroed.
//! * The immediates round-trip.
//! * [`Client`] and [`Server`] fed arbitrary sequences of inputs, commands and time jumps never
//!   panic, and `poll_action` always drains within a bounded number of actions.

use core::time::Duration;

use naaice_core::config::{MAX_REGIONS, MRSP_RECV_LEN, NAA_ADDR_LIMIT};
use naaice_core::machine::{KernelSet, Placement, RecvBuffer, WorkError, WrId};
use naaice_core::region::RegionFlags;
use naaice_core::wire::imm::{Request, encode_request};
use naaice_core::wire::mrsp::{self, AdvertRecord, MrspErrorCode, Packet, Repr, RequestRecord};
use naaice_core::{
    Action, Client, ClientConfig, ClientRegions, FunctionCode, Input, Instant, RegionId,
    ReturnCode, Server, ServerConfig,
};
use proptest::prelude::*;

/// The flag bytes the C client produces (spec §2.4).
const VALID_FLAGS: [u8; 7] = [0x00, 0x01, 0x04, 0x06, 0x08, 0x0C, 0x0E];

/// Most actions one drain may produce before the machine is considered stuck.
const DRAIN_BOUND: usize = 1000;

// ---------------------------------------------------------------------------------------------
// Strategies for wire messages.

fn request_record() -> impl Strategy<Value = RequestRecord> {
    (
        prop::sample::select(&VALID_FLAGS[..]),
        0..NAA_ADDR_LIMIT,
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(bits, requested_addr, addr, rkey, size)| {
            let flags = RegionFlags::from_wire(bits).expect("valid flag byte");
            let internal = flags == RegionFlags::INTERNAL;
            RequestRecord {
                flags,
                requested_addr,
                addr: if internal { 0 } else { addr },
                rkey: if internal { 0 } else { rkey },
                size,
            }
        })
}

fn advert_record() -> impl Strategy<Value = AdvertRecord> {
    (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(addr, rkey, size)| AdvertRecord {
        addr,
        rkey,
        size,
    })
}

fn error_code() -> impl Strategy<Value = MrspErrorCode> {
    prop::sample::select(
        &[
            MrspErrorCode::NotEnoughMemory,
            MrspErrorCode::InvalidAddress,
            MrspErrorCode::TooManyRegions,
        ][..],
    )
}

fn repr() -> impl Strategy<Value = Repr> {
    prop_oneof![
        error_code().prop_map(Repr::Error),
        prop::collection::vec(request_record(), 0..=MAX_REGIONS)
            .prop_map(|r| Repr::AdvertiseRequest(r.into_iter().collect())),
        prop::collection::vec(advert_record(), 0..=MAX_REGIONS)
            .prop_map(|r| Repr::Advertise(r.into_iter().collect())),
    ]
}

fn emit_vec(repr: &Repr) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len()];
    let len = repr.emit(&mut buf).expect("valid Repr emits");
    assert_eq!(len, buf.len());
    buf
}

/// Bytes with a plausible header: any type 0..=4 (or any byte), a count near the limit, and a
/// body of arbitrary length whose record flag bytes are often valid.
fn header_first_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![0u8..=4, any::<u8>()],
        prop_oneof![0u8..=34, any::<u8>()],
        any::<[u8; 2]>(),
        prop::collection::vec(any::<u8>(), 0..1000),
        any::<bool>(),
    )
        .prop_map(|(ty, count, pad, mut body, fix_flags)| {
            if fix_flags && ty == 0x01 {
                for (i, chunk) in body.chunks_mut(mrsp::REQUEST_RECORD_LEN).enumerate() {
                    chunk[0] = VALID_FLAGS[(chunk[0] as usize + i) % VALID_FLAGS.len()];
                    if chunk[0] == 0x01 && chunk.len() >= 20 {
                        chunk[8..20].fill(0);
                    }
                }
            }
            let mut out = vec![ty, count, pad[0], pad[1]];
            out.append(&mut body);
            out
        })
}

/// Checks the parse contract on `bytes`: no panic, and on success the re-emitted message equals
/// the input's message bytes with the padding zeroed.
fn check_parse_reemit(bytes: &[u8]) -> Result<(), TestCaseError> {
    let view = Packet::new_checked(bytes);
    match Repr::parse(bytes) {
        Ok(repr) => {
            let packet = view.expect("parse succeeded, so the view must too");
            let len = packet.total_len();
            prop_assert_eq!(repr.buffer_len(), len);
            prop_assert_eq!(packet.msg_type(), repr.msg_type());
            let mut expected = bytes[..len].to_vec();
            expected[2] = 0;
            expected[3] = 0;
            let mut out = vec![0xEEu8; len + 8];
            prop_assert_eq!(repr.emit(&mut out), Ok(len));
            prop_assert_eq!(&out[..len], &expected[..]);
            prop_assert!(
                out[len..].iter().all(|&b| b == 0xEE),
                "emit wrote past the message"
            );
            prop_assert_eq!(Repr::parse(&out[..len]), Ok(repr));
        }
        Err(_) => {
            // The view may accept what parse refuses (flags are checked per record), but then
            // walking the records must hit the same kind of problem without panicking.
            if let Ok(p) = view {
                for i in 0..=p.count() {
                    let _ = p.request_record(i);
                    let _ = p.advert_record(i);
                }
                let _ = (p.error_code(), p.total_len());
            }
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn parse_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..1000)) {
        check_parse_reemit(&bytes)?;
    }

    #[test]
    fn parse_never_panics_on_header_first_bytes(bytes in header_first_bytes()) {
        check_parse_reemit(&bytes)?;
    }

    #[test]
    fn parse_of_mutated_messages(
        repr in repr(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
        trailing in prop::collection::vec(any::<u8>(), 0..32),
    ) {
        let mut bytes = emit_vec(&repr);
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        } else {
            bytes.extend_from_slice(&trailing);
        }
        check_parse_reemit(&bytes)?;
    }

    #[test]
    fn parse_emit_round_trip(repr in repr()) {
        let bytes = emit_vec(&repr);
        prop_assert_eq!(&Repr::parse(&bytes), &Ok(repr.clone()));
        let p = Packet::new_checked(&bytes[..]).expect("emitted message is valid");
        prop_assert_eq!(p.total_len(), bytes.len());
        prop_assert_eq!(p.msg_type(), repr.msg_type());
        match &repr {
            Repr::Error(code) => {
                prop_assert_eq!(p.error_code(), Some(*code));
                prop_assert_eq!(&bytes[2..4], &[0u8, 0][..]);
            }
            Repr::AdvertiseRequest(records) => {
                prop_assert_eq!(usize::from(p.count()), records.len());
                for (i, r) in records.iter().enumerate() {
                    prop_assert_eq!(p.request_record(i as u8), Some(Ok(*r)));
                }
            }
            Repr::Advertise(records) => {
                prop_assert_eq!(usize::from(p.count()), records.len());
                for (i, r) in records.iter().enumerate() {
                    prop_assert_eq!(p.advert_record(i as u8), Some(*r));
                }
            }
        }
        // The emit_* helpers agree with Repr::emit.
        let mut buf = vec![0u8; bytes.len()];
        let len = match &repr {
            Repr::Error(code) => mrsp::emit_error(&mut buf, *code),
            Repr::AdvertiseRequest(r) => mrsp::emit_advertise_request(&mut buf, r.iter().copied()),
            Repr::Advertise(r) => mrsp::emit_advertise(&mut buf, r.iter().copied()),
        };
        prop_assert_eq!(len, Ok(bytes.len()));
        prop_assert_eq!(buf, bytes);
    }

    #[test]
    fn padding_and_trailing_bytes_do_not_change_the_parse(
        repr in repr(),
        pad in any::<[u8; 2]>(),
        trailing in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = emit_vec(&repr);
        bytes[2..4].copy_from_slice(&pad);
        bytes.extend_from_slice(&trailing);
        prop_assert_eq!(Repr::parse(&bytes), Ok(repr));
        check_parse_reemit(&bytes)?;
    }

    #[test]
    fn emit_into_short_buffer_fails(repr in repr(), cut in any::<prop::sample::Index>()) {
        let needed = repr.buffer_len();
        let len = cut.index(needed);
        let mut buf = vec![0u8; len];
        prop_assert_eq!(repr.emit(&mut buf), Err(naaice_core::wire::Error::Truncated { needed, len }));
    }

    #[test]
    fn request_immediate_round_trip(code in 1u8..=127, user in any::<[u8; 3]>()) {
        let f = FunctionCode::new(code).expect("1..=127");
        let value = encode_request(f, user);
        prop_assert_eq!(value & 0x80, 0x80, "start marker");
        prop_assert_eq!(Request::decode(value), Request::Call { fncode: code, user });
        prop_assert_eq!(value & 0xFFFF_FF00, Request::user_word(user));
    }

    #[test]
    fn request_decode_matches_c(value in any::<u32>()) {
        let expected = if value == 0 {
            Request::ClientError
        } else {
            let b = value.to_be_bytes();
            Request::Call { fncode: (value & 0x7F) as u8, user: [b[2], b[1], b[0]] }
        };
        prop_assert_eq!(Request::decode(value), expected);
    }

    #[test]
    fn return_code_round_trip(code in 0u32..=ReturnCode::MAX_VALUE, low in any::<u8>()) {
        let rc = ReturnCode::new(code).expect("24-bit code");
        prop_assert_eq!(rc.to_imm() & 0xFF, 0, "low byte left 0");
        prop_assert_eq!(ReturnCode::from_imm(rc.to_imm()), rc);
        // The low byte is ignored by the decoder.
        prop_assert_eq!(ReturnCode::from_imm(rc.to_imm() | u32::from(low)), rc);
        prop_assert_eq!(rc.naa_error(), (code & 0xFF) as u8);
    }

    #[test]
    fn return_code_decode_matches_c(value in any::<u32>()) {
        let rc = ReturnCode::from_imm(value);
        prop_assert_eq!(rc.get(), value >> 8);
        prop_assert_eq!(rc.naa_error(), ((value >> 8) & 0xFF) as u8);
    }
}

// ---------------------------------------------------------------------------------------------
// Driving the machines with arbitrary operation sequences.

/// Where a work-request id comes from.
#[derive(Clone, Debug)]
enum Id {
    /// One the machine handed out earlier (index into the seen list, modulo its length).
    Seen(prop::sample::Index),
    /// A structurally plausible id: kind in 0..=6, small index.
    Shaped(u8, u8),
    /// Anything.
    Raw(u64),
}

/// What a received SEND carries.
#[derive(Clone, Debug)]
enum Payload {
    Bytes(Vec<u8>),
    Valid(Box<Repr>),
    /// (client) an Advertisement that fits the client's parameters.
    MatchingAdvert(u64, u32, u32),
    /// (server) an Advertisement+Request built from a random client region table.
    TableRequest(Vec<(u8, u32)>, u64),
}

#[derive(Clone, Debug)]
enum Op {
    AddressResolved,
    Established,
    Disconnected,
    SendCompleted(Id),
    WriteCompleted(Id),
    Received(Id, Payload),
    WriteImm(Id, u32, u32),
    WorkFailed(Id, u8),
    PostFailed(Id),
    /// Move the clock forward by this many microseconds and call `handle_timeout`.
    Advance(u64),
    /// Jump to the machine's deadline and call `handle_timeout`.
    FireTimeout,
    StartMrsp,
    StartRpc(Option<u32>),
    SetUserBytes([u8; 3]),
    SetBytesToSend(u8, Option<u32>),
    /// Server: `region_assigned`; `None` picks the next unassigned allocation.
    RegionAssigned(Option<u8>, u64, u32),
    AssignmentFailed(u8),
    KernelFinished(u32),
    /// Drain into a buffer of this length instead of the full one.
    SmallBuffer(u16),
    /// Answer an outstanding action the way a well-behaved transport and peer would
    /// (completion, reply, allocation, kernel result); keeps runs going deep.
    Complete(prop::sample::Index, u32, u32),
}

fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        6 => any::<prop::sample::Index>().prop_map(Id::Seen),
        2 => (0u8..=6, 0u8..=4).prop_map(|(k, i)| Id::Shaped(k, i)),
        1 => any::<u64>().prop_map(Id::Raw),
    ]
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200).prop_map(Payload::Bytes),
        repr().prop_map(|r| Payload::Valid(Box::new(r))),
        (any::<u64>(), any::<u32>(), 0u32..64)
            .prop_map(|(a, k, extra)| Payload::MatchingAdvert(a, k, extra)),
        (
            prop::collection::vec(
                (prop::sample::select(&VALID_FLAGS[..]), 0u32..100_000),
                0..34
            ),
            prop_oneof![Just(0u64), any::<u64>()],
        )
            .prop_map(|(r, off)| Payload::TableRequest(r, off)),
    ]
}

fn imm() -> impl Strategy<Value = u32> {
    prop_oneof![
        1 => Just(0u32),
        4 => (1u8..=127, any::<[u8; 3]>())
            .prop_map(|(f, u)| encode_request(FunctionCode::new(f).expect("valid"), u)),
        2 => (0u32..0x200).prop_map(|rc| rc << 8),
        2 => any::<u32>(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::AddressResolved),
        2 => Just(Op::Established),
        1 => Just(Op::Disconnected),
        4 => id().prop_map(Op::SendCompleted),
        6 => id().prop_map(Op::WriteCompleted),
        5 => (id(), payload()).prop_map(|(i, p)| Op::Received(i, p)),
        5 => (id(), imm(), any::<u32>()).prop_map(|(i, v, l)| Op::WriteImm(i, v, l)),
        1 => (id(), 0u8..8).prop_map(|(i, e)| Op::WorkFailed(i, e)),
        1 => id().prop_map(Op::PostFailed),
        2 => prop_oneof![0u64..2_000_000, any::<u64>()].prop_map(Op::Advance),
        1 => Just(Op::FireTimeout),
        3 => Just(Op::StartMrsp),
        4 => prop::option::of(0u32..5_000_000).prop_map(Op::StartRpc),
        1 => any::<[u8; 3]>().prop_map(Op::SetUserBytes),
        1 => (0u8..34, prop::option::of(0u32..100_000)).prop_map(|(r, l)| Op::SetBytesToSend(r, l)),
        6 => (prop::option::of(0u8..34), any::<u64>(), any::<u32>()).prop_map(|(r, a, k)| Op::RegionAssigned(r, a, k)),
        1 => (0u8..34).prop_map(Op::AssignmentFailed),
        4 => prop_oneof![Just(0u32), 0u32..0x200, any::<u32>()].prop_map(Op::KernelFinished),
        1 => (0u16..800).prop_map(Op::SmallBuffer),
        24 => (any::<prop::sample::Index>(), imm(), any::<u32>()).prop_map(|(i, v, l)| Op::Complete(i, v, l)),
    ]
}

/// Mostly well-behaved operations: answers to outstanding actions, commands and small clock
/// steps, with an occasional disruptive input.
fn gentle_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        40 => (any::<prop::sample::Index>(), imm(), any::<u32>()).prop_map(|(i, v, l)| Op::Complete(i, v, l)),
        6 => Just(Op::StartMrsp),
        8 => prop::option::of(0u32..5_000_000).prop_map(Op::StartRpc),
        2 => any::<[u8; 3]>().prop_map(Op::SetUserBytes),
        2 => (0u8..8, prop::option::of(0u32..10_000)).prop_map(|(r, l)| Op::SetBytesToSend(r, l)),
        4 => (0u64..1000).prop_map(Op::Advance),
        1 => op(),
    ]
}

/// Either an arbitrary operation sequence or a mostly well-behaved one that starts by
/// connecting (the latter reaches the RPC phases).
fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop_oneof![
        prop::collection::vec(op(), 0..80),
        prop::collection::vec(gentle_op(), 0..150).prop_map(|mut v| {
            v.splice(0..0, [Op::Established, Op::StartMrsp]);
            v
        }),
    ]
}

/// A random client region table (may be empty, full, or lay out past 2^56).
fn client_table() -> impl Strategy<Value = ClientRegions> {
    (
        prop::collection::vec((any::<u64>(), any::<u32>(), 0u64..200_000, 0u8..16), 0..34),
        0u8..3,
        prop_oneof![Just(0u64), any::<u64>()],
    )
        .prop_map(|(params, internal, offset)| table_from(&params, internal, offset))
}

fn table_from(params: &[(u64, u32, u64, u8)], internal: u8, offset: u64) -> ClientRegions {
    let mut t = ClientRegions::new();
    for &(addr, rkey, size, bits) in params {
        let Ok(id) = t.add_param(addr, rkey, size) else {
            continue;
        };
        if bits & 0x04 != 0 {
            let _ = t.set_input(id);
        }
        if bits & 0x08 != 0 {
            let _ = t.set_output(id);
        }
        if bits & 0x02 != 0 {
            let _ = t.set_single_send(id);
        }
    }
    for i in 0..internal {
        let _ = t.add_internal(u64::from(i) * 5000 + 1);
    }
    t.set_addr_offset(offset);
    t
}

fn work_error(e: u8) -> WorkError {
    [
        WorkError::LocalLength,
        WorkError::LocalProtection,
        WorkError::Flushed,
        WorkError::RemoteAccess,
        WorkError::RemoteInvalidRequest,
        WorkError::RnrRetryExceeded,
        WorkError::RetryExceeded,
        WorkError::Other,
    ][usize::from(e % 8)]
}

/// State shared by both drivers: the clock and the ids the machine handed out.
struct Harness {
    now: Instant,
    seen: Vec<WrId>,
    allocations: Vec<RegionId>,
    /// Actions not answered yet (for [`Op::Complete`]).
    outstanding: Vec<Action>,
    buf_len: usize,
}

impl Harness {
    fn new() -> Self {
        Self {
            now: Instant::ZERO,
            seen: Vec::new(),
            allocations: Vec::new(),
            outstanding: Vec::new(),
            buf_len: MRSP_RECV_LEN,
        }
    }

    fn wr_id(&self, id: &Id) -> WrId {
        match id {
            Id::Seen(i) if !self.seen.is_empty() => self.seen[i.index(self.seen.len())],
            Id::Seen(i) => WrId::from_raw(i.index(1 << 20) as u64),
            Id::Shaped(kind, index) => WrId::from_raw((u64::from(*kind) << 32) | u64::from(*index)),
            Id::Raw(raw) => WrId::from_raw(*raw),
        }
    }

    /// Drains `poll` into a buffer, remembering ids, checking termination and Send lengths.
    fn drain(
        &mut self,
        mut poll: impl FnMut(&mut [u8]) -> Option<Action>,
    ) -> Result<(), TestCaseError> {
        let mut buf = vec![0u8; self.buf_len];
        self.buf_len = MRSP_RECV_LEN;
        for _ in 0..DRAIN_BOUND {
            let Some(action) = poll(&mut buf) else {
                return Ok(());
            };
            match action {
                Action::PostRecv { wr_id, .. } => self.seen.push(wr_id),
                Action::Send { wr_id, len } => {
                    prop_assert!(
                        len <= buf.len(),
                        "Send of {} bytes from a {}-byte buffer",
                        len,
                        buf.len()
                    );
                    // Whatever the machine sends is a valid MRSP message.
                    prop_assert!(
                        Repr::parse(&buf[..len]).is_ok(),
                        "machine sent an invalid message"
                    );
                    self.seen.push(wr_id);
                }
                Action::Write(w) => self.seen.push(w.wr_id),
                Action::Allocate { region, .. } => self.allocations.push(region),
                _ => {}
            }
            if matches!(
                action,
                Action::PostRecv { .. }
                    | Action::Send { .. }
                    | Action::Write(_)
                    | Action::Allocate { .. }
                    | Action::RunKernel(_)
            ) {
                self.outstanding.push(action);
            }
        }
        prop_assert!(
            false,
            "poll_action did not drain within {} actions",
            DRAIN_BOUND
        );
        Ok(())
    }

    /// Removes and returns an outstanding action.
    fn take_outstanding(&mut self, i: &prop::sample::Index) -> Option<Action> {
        if self.outstanding.is_empty() {
            return None;
        }
        Some(self.outstanding.remove(i.index(self.outstanding.len())))
    }

    fn advance(&mut self, micros: u64) {
        self.now = Instant::from_micros(self.now.as_micros().saturating_add(micros));
    }
}

fn payload_bytes(p: &Payload, client: Option<&Client>) -> Vec<u8> {
    match p {
        Payload::Bytes(b) => b.clone(),
        Payload::Valid(r) => emit_vec(r),
        Payload::MatchingAdvert(addr, rkey, extra) => {
            let params = client
                .map(|c| c.regions().params().to_vec())
                .unwrap_or_default();
            let recs: Vec<AdvertRecord> = params
                .iter()
                .enumerate()
                .map(|(i, p)| AdvertRecord {
                    addr: addr.wrapping_add(i as u64 * 0x1_0000) & 0x0000_FFFF_FFFF_FFFF,
                    rkey: rkey.wrapping_add(i as u32),
                    size: p.size.saturating_add(*extra),
                })
                .collect();
            let mut buf = vec![0u8; MRSP_RECV_LEN];
            match mrsp::emit_advertise(&mut buf, recs.into_iter()) {
                Ok(len) => buf[..len].to_vec(),
                Err(_) => Vec::new(),
            }
        }
        Payload::TableRequest(regions, offset) => {
            let params: Vec<_> = regions
                .iter()
                .map(|&(bits, size)| (0x7F00_0000_0000, 0x1000, u64::from(size), bits))
                .collect();
            let t = table_from(&params, (regions.len() % 3) as u8, *offset);
            let mut buf = vec![0u8; MRSP_RECV_LEN];
            match t
                .records()
                .map(|r| mrsp::emit_advertise_request(&mut buf, r))
            {
                Ok(Ok(len)) => buf[..len].to_vec(),
                _ => Vec::new(),
            }
        }
    }
}

fn run_client(config: ClientConfig, table: ClientRegions, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut c = Client::new(config, table);
    let mut h = Harness::new();
    h.drain(|b| c.poll_action(b))?;
    for op in ops {
        let now = h.now;
        match op {
            Op::AddressResolved => c.handle_input(now, Input::AddressResolved),
            Op::Established => c.handle_input(now, Input::Established),
            Op::Disconnected => c.handle_input(now, Input::Disconnected),
            Op::SendCompleted(i) => c.handle_input(now, Input::SendCompleted(h.wr_id(i))),
            Op::WriteCompleted(i) => c.handle_input(now, Input::WriteCompleted(h.wr_id(i))),
            Op::Received(i, p) => {
                let data = payload_bytes(p, Some(&c));
                c.handle_input(
                    now,
                    Input::Received {
                        wr_id: h.wr_id(i),
                        data: &data,
                    },
                );
            }
            Op::WriteImm(i, imm, len) => {
                c.handle_input(
                    now,
                    Input::WriteImmReceived {
                        wr_id: h.wr_id(i),
                        imm: *imm,
                        len: *len,
                    },
                );
            }
            Op::WorkFailed(i, e) => {
                c.handle_input(
                    now,
                    Input::WorkFailed {
                        wr_id: h.wr_id(i),
                        error: work_error(*e),
                    },
                );
            }
            Op::PostFailed(i) => c.handle_input(now, Input::PostFailed(h.wr_id(i))),
            Op::Advance(us) => {
                h.advance(*us);
                c.handle_timeout(h.now);
            }
            Op::FireTimeout => {
                if let Some(t) = c.poll_timeout() {
                    h.now = h.now.max(t);
                    c.handle_timeout(h.now);
                    prop_assert!(
                        c.poll_timeout().is_none_or(|d| d > h.now),
                        "deadline not cleared"
                    );
                }
            }
            Op::StartMrsp => {
                let _ = c.start_mrsp(now);
            }
            Op::StartRpc(None) => {
                let _ = c.start_rpc(now);
            }
            Op::StartRpc(Some(us)) => {
                let _ = c.start_rpc_with_timeout(now, Duration::from_micros(u64::from(*us)));
            }
            Op::SetUserBytes(u) => {
                let _ = c.set_user_bytes(*u);
            }
            Op::SetBytesToSend(r, l) => {
                let _ = c.set_bytes_to_send(RegionId::new(*r), *l);
            }
            Op::SmallBuffer(len) => h.buf_len = usize::from(*len),
            Op::Complete(i, imm, len) => match h.take_outstanding(i) {
                Some(Action::PostRecv {
                    wr_id,
                    buffer: RecvBuffer::Message,
                }) => {
                    let data = payload_bytes(
                        &Payload::MatchingAdvert(0x55AA_0000_0000, 0xA000, *len % 3),
                        Some(&c),
                    );
                    c.handle_input(now, Input::Received { wr_id, data: &data });
                }
                Some(Action::PostRecv {
                    wr_id,
                    buffer: RecvBuffer::Empty,
                }) => {
                    c.handle_input(
                        now,
                        Input::WriteImmReceived {
                            wr_id,
                            imm: *imm & 0xFFFF_FF00,
                            len: *len,
                        },
                    );
                }
                Some(Action::Send { wr_id, .. }) => {
                    c.handle_input(now, Input::SendCompleted(wr_id))
                }
                Some(Action::Write(w)) => c.handle_input(now, Input::WriteCompleted(w.wr_id)),
                _ => {}
            },
            Op::RegionAssigned(..) | Op::AssignmentFailed(_) | Op::KernelFinished(_) => {}
        }
        h.drain(|b| c.poll_action(b))?;
    }
    Ok(())
}

fn run_server(config: ServerConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut h = Harness::new();
    let mut s = Server::new(config, h.now);
    h.drain(|b| s.poll_action(b))?;
    for op in ops {
        let now = h.now;
        match op {
            Op::AddressResolved => s.handle_input(now, Input::AddressResolved),
            Op::Established => s.handle_input(now, Input::Established),
            Op::Disconnected => s.handle_input(now, Input::Disconnected),
            Op::SendCompleted(i) => s.handle_input(now, Input::SendCompleted(h.wr_id(i))),
            Op::WriteCompleted(i) => s.handle_input(now, Input::WriteCompleted(h.wr_id(i))),
            Op::Received(i, p) => {
                let data = payload_bytes(p, None);
                s.handle_input(
                    now,
                    Input::Received {
                        wr_id: h.wr_id(i),
                        data: &data,
                    },
                );
            }
            Op::WriteImm(i, imm, len) => {
                s.handle_input(
                    now,
                    Input::WriteImmReceived {
                        wr_id: h.wr_id(i),
                        imm: *imm,
                        len: *len,
                    },
                );
            }
            Op::WorkFailed(i, e) => {
                s.handle_input(
                    now,
                    Input::WorkFailed {
                        wr_id: h.wr_id(i),
                        error: work_error(*e),
                    },
                );
            }
            Op::PostFailed(i) => s.handle_input(now, Input::PostFailed(h.wr_id(i))),
            Op::Advance(us) => {
                h.advance(*us);
                s.handle_timeout(h.now);
            }
            Op::FireTimeout => {
                if let Some(t) = s.poll_timeout() {
                    h.now = h.now.max(t);
                    s.handle_timeout(h.now);
                }
            }
            Op::RegionAssigned(r, addr, rkey) => {
                let id = match r {
                    Some(r) => RegionId::new(*r),
                    None => {
                        let next = s.regions().regions().iter().position(|r| r.local.is_none());
                        RegionId::new(next.unwrap_or(0) as u8)
                    }
                };
                let _ = s.region_assigned(now, id, *addr, *rkey);
            }
            Op::AssignmentFailed(r) => {
                let _ = s.assignment_failed(now, RegionId::new(*r));
            }
            Op::KernelFinished(rc) => {
                let _ = s.kernel_finished(
                    now,
                    ReturnCode::new(*rc & ReturnCode::MAX_VALUE).unwrap_or(ReturnCode::SUCCESS),
                );
            }
            Op::SmallBuffer(len) => h.buf_len = usize::from(*len),
            Op::Complete(i, imm, len) => match h.take_outstanding(i) {
                Some(Action::PostRecv {
                    wr_id,
                    buffer: RecvBuffer::Message,
                }) => {
                    let regions: Vec<(u8, u32)> = (0..(*len % 6))
                        .map(|k| {
                            (
                                VALID_FLAGS[((*imm >> (k * 3)) % 7) as usize],
                                1 + (*imm >> k) % 9000,
                            )
                        })
                        .collect();
                    let data = payload_bytes(&Payload::TableRequest(regions, 0), None);
                    s.handle_input(now, Input::Received { wr_id, data: &data });
                }
                Some(Action::PostRecv {
                    wr_id,
                    buffer: RecvBuffer::Empty,
                }) => {
                    s.handle_input(
                        now,
                        Input::WriteImmReceived {
                            wr_id,
                            imm: *imm,
                            len: *len,
                        },
                    );
                }
                Some(Action::Send { wr_id, .. }) => {
                    s.handle_input(now, Input::SendCompleted(wr_id))
                }
                Some(Action::Write(w)) => s.handle_input(now, Input::WriteCompleted(w.wr_id)),
                Some(Action::Allocate { region, .. }) => {
                    let _ = s.region_assigned(now, region, u64::from(*imm) << 12, *len);
                }
                Some(Action::RunKernel(_)) => {
                    let _ = s.kernel_finished(
                        now,
                        ReturnCode::new(*len & 0x7F).unwrap_or(ReturnCode::SUCCESS),
                    );
                }
                _ => {}
            },
            Op::StartMrsp | Op::StartRpc(_) | Op::SetUserBytes(_) | Op::SetBytesToSend(..) => {}
        }
        h.drain(|b| s.poll_action(b))?;
    }
    Ok(())
}

fn client_config() -> impl Strategy<Value = ClientConfig> {
    (
        1u8..=127,
        0u64..20_000_000,
        0u64..20_000_000,
        prop_oneof![Just(32u8), Just(31u8), any::<u8>()],
    )
        .prop_map(|(f, mrsp_us, rpc_us, max_records)| {
            let mut c = ClientConfig::new(FunctionCode::new(f).expect("valid"));
            c.mrsp_timeout = Duration::from_micros(mrsp_us);
            c.rpc_timeout = Duration::from_micros(rpc_us);
            c.max_records = max_records;
            c
        })
}

fn server_config() -> impl Strategy<Value = ServerConfig> {
    (
        any::<u128>(),
        prop_oneof![Just(32u8), any::<u8>()],
        prop_oneof![Just(1u64 << 30), any::<u64>()],
        prop_oneof![
            Just(Placement::Allocate),
            (any::<u64>(), any::<u64>()).prop_map(|(base, len)| Placement::Requested { base, len }),
            (0u64..0x2000_0000).prop_map(|len| Placement::Requested { base: 0, len }),
        ],
        (0u64..20_000_000, 0u64..20_000_000, 0u64..20_000_000),
        prop::option::of(0u64..20_000_000),
    )
        .prop_map(
            |(kernels, max_regions, max_total_bytes, placement, (m, k, c), idle)| {
                let mut set = KernelSet::empty();
                for code in 1u8..=127 {
                    if kernels & (1u128 << code) != 0 {
                        set.insert(FunctionCode::new(code).expect("valid"));
                    }
                }
                let mut cfg = ServerConfig::new(set);
                cfg.max_regions = max_regions;
                cfg.max_total_bytes = max_total_bytes;
                cfg.placement = placement;
                cfg.mrsp_timeout = Duration::from_micros(m);
                cfg.kernel_timeout = Duration::from_micros(k);
                cfg.completion_timeout = Duration::from_micros(c);
                cfg.idle_timeout = idle.map(Duration::from_micros);
                cfg
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn client_machine_never_panics(
        config in client_config(),
        table in client_table(),
        ops in ops(),
    ) {
        run_client(config, table, &ops)?;
    }

    #[test]
    fn server_machine_never_panics(config in server_config(), ops in ops()) {
        run_server(config, &ops)?;
    }
}
