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

use naaice_core::config::{MAX_REGIONS, NAA_ADDR_LIMIT};
use naaice_core::machine::{KernelSet, Placement};
use naaice_core::region::RegionFlags;
use naaice_core::testkit::ops::{Id, Op, Payload, VALID_FLAGS, table_from};
use naaice_core::testkit::run::{run_client, run_server};
use naaice_core::wire::imm::{Request, encode_request};
use naaice_core::wire::mrsp::{self, AdvertRecord, MrspErrorCode, Packet, Repr, RequestRecord};
use naaice_core::{ClientConfig, ClientRegions, FunctionCode, ReturnCode, ServerConfig};
use proptest::prelude::*;

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
// Driving the machines with arbitrary operation sequences (the interpreter is
// `naaice_core::testkit::ops`, shared with the fuzz targets).

/// Where a work-request id comes from.
fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        6 => any::<u16>().prop_map(Id::Seen),
        2 => (0u8..=6, 0u8..=4).prop_map(|(k, i)| Id::Shaped(k, i)),
        1 => any::<u64>().prop_map(Id::Raw),
    ]
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200).prop_map(Payload::Bytes),
        repr().prop_map(|r| Payload::Bytes(emit_vec(&r))),
        (any::<u64>(), any::<u32>(), any::<u8>())
            .prop_map(|(a, k, extra)| Payload::MatchingAdvert(a, k, extra)),
        (
            prop::collection::vec((0u8..7, 0u32..100_000), 0..34),
            0u8..3,
            prop_oneof![Just(0u64), any::<u64>()],
        )
            .prop_map(|(r, internal, off)| Payload::TableRequest(r, internal, off)),
        (any::<u8>(), any::<[u8; 2]>()).prop_map(|(c, pad)| Payload::Error(c, pad)),
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
        5 => prop::option::of((0u32..5_000_000, any::<[u8; 3]>(), any::<u8>())).prop_map(Op::StartRpc),
        1 => (0u8..34, prop::option::of(0u32..100_000)).prop_map(|(r, l)| Op::SetBytesToSend(r, l)),
        6 => (prop::option::of(0u8..34), any::<u64>(), any::<u32>()).prop_map(|(r, a, k)| Op::RegionAssigned(r, a, k)),
        1 => (0u8..34).prop_map(Op::AssignmentFailed),
        4 => prop_oneof![Just(0u32), 0u32..0x200, any::<u32>()].prop_map(Op::KernelFinished),
        1 => (0u16..800).prop_map(Op::SmallBuffer),
        24 => (any::<u16>(), imm(), any::<u32>()).prop_map(|(i, v, l)| Op::Complete(i, v, l)),
    ]
}

/// Mostly well-behaved operations: answers to outstanding actions, commands and small clock
/// steps, with an occasional disruptive input.
fn gentle_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        40 => (any::<u16>(), imm(), any::<u32>()).prop_map(|(i, v, l)| Op::Complete(i, v, l)),
        6 => Just(Op::StartMrsp),
        10 => prop::option::of((0u32..5_000_000, any::<[u8; 3]>(), any::<u8>())).prop_map(Op::StartRpc),
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
        // Selectors 0..7 pick a valid flag byte, 0xF0.. raw (possibly odd) flag bits.
        prop::collection::vec(
            (
                any::<u64>(),
                any::<u32>(),
                0u64..200_000,
                prop_oneof![0u8..7, 0xF0u8..=0xFF],
            ),
            0..34,
        ),
        0u8..3,
        prop_oneof![Just(0u64), any::<u64>()],
    )
        .prop_map(|(params, internal, offset)| table_from(&params, internal, offset))
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
        run_client(config, table, &ops);
    }

    #[test]
    fn server_machine_never_panics(config in server_config(), ops in ops()) {
        run_server(config, &ops);
    }
}
