//! The test vectors of spec §10, byte-exact in both directions.
//!
//! * MRSP messages (§10.1–§10.4): the Advertisement+Request of vectors A, B and C is built from a
//!   [`ClientRegions`] table, so the requested-address layout of §2.5 is checked too; every
//!   message is emitted from its owned [`Repr`], parsed back, and inspected through the
//!   zero-copy [`Packet`] view.
//! * Immediates (§3.2, §3.7, §10.5): every table row, encode and decode.
//! * The machines: vectors A and B driven through [`Client`] and [`Server`], checking the
//!   messages they send and the writes they post against the spec's wire trace.
//! * Negative cases: every truncation, reserved and unknown types, too many records, invalid
//!   flags, internal records with an address, invalid error codes, oversized addresses and
//!   short emit buffers all return errors.

use core::time::Duration;

use hex_literal::hex;
use naaice_core::config::{MAX_REGIONS, NAA_ADDR_LIMIT};
use naaice_core::machine::{
    Allocation, Error as MachineError, KernelCall, KernelSet, RecvBuffer, RpcResult, WrId, Write,
};
use naaice_core::region::{RegionError, RegionFlags};
use naaice_core::testkit::AnyAction as Action;
use naaice_core::wire::Error;
use naaice_core::wire::imm::{Request, encode_request};
use naaice_core::wire::mrsp::{
    self, AdvertRecord, MrspErrorCode, MsgType, Packet, Repr, RequestRecord,
};
use naaice_core::{
    Client, ClientConfig, ClientRegions, FunctionCode, Input, Instant, Machine, Phase, RegionId,
    ReturnCode, RpcArgs, Server, ServerConfig,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

// ---------------------------------------------------------------------------------------------
// The vectors (copied verbatim from spec §10).

/// §10.1 AAR, 76 bytes.
const A_AAR: [u8; 76] = hex!(
    "01030000040000000000000000007f00001000000000123400000400040000000000100000007f00002000000000123500000400080000000000200000007f00003000000000123600000200"
);
/// §10.1 Advertisement, 52 bytes.
const A_ADV: [u8; 52] = hex!(
    "02030000000055aa000100000000a00100000400000055aa000200000000a00200000400000055aa000300000000a00300000200"
);
/// §10.2 AAR, 100 bytes.
const B_AAR: [u8; 100] = hex!(
    "01040000060000001000200000007f00000a000000010001000000400c0000001000300000007f00000b000000010002000003e8080000001000400000007f00000c00000001000300000100010000001000000000000000000000000000000000002000"
);
/// §10.2 Advertisement, 52 bytes.
const B_ADV: [u8; 52] = hex!(
    "02030000000055bb000010000000b00100000040000055bb000020000000b002000003e8000055bb000030000000b00300000100"
);
/// §10.3 AAR, 28 bytes.
const C_AAR: [u8; 28] = hex!("010100000c0000000000000000007f00004000000000077700001000");
/// §10.3 Advertisement, 20 bytes.
const C_ADV: [u8; 20] = hex!("02010000000055cc000000000000c00100001000");
/// §10.4 Error message as a conformant sender emits it.
const ERR_01: [u8; 4] = hex!("00010000");

fn flags(bits: u8) -> RegionFlags {
    RegionFlags::from_wire(bits).expect("valid flag byte")
}

fn req(flag_bits: u8, requested_addr: u64, addr: u64, rkey: u32, size: u32) -> RequestRecord {
    RequestRecord {
        flags: flags(flag_bits),
        requested_addr,
        addr,
        rkey,
        size,
    }
}

fn adv(addr: u64, rkey: u32, size: u32) -> AdvertRecord {
    AdvertRecord { addr, rkey, size }
}

fn aar_repr(records: &[RequestRecord]) -> Repr {
    Repr::AdvertiseRequest(records.iter().copied().collect())
}

fn adv_repr(records: &[AdvertRecord]) -> Repr {
    Repr::Advertise(records.iter().copied().collect())
}

/// A region of a vector, as the client requests it and the NAA advertises it: flag byte,
/// requested address, the client's address and rkey, size, then the NAA's address and rkey
/// (both 0 for an internal region, which is not advertised).
type Region = (u8, u64, u64, u32, u32, u64, u32);

/// §10.1: two inputs and an output.
#[rustfmt::skip]
const A_REGIONS: [Region; 3] = [
    (0x04, 0x0, 0x0000_7F00_0010_0000, 0x1234, 1024, 0x0000_55AA_0001_0000, 0xA001),
    (0x04, 0x1000, 0x0000_7F00_0020_0000, 0x1235, 1024, 0x0000_55AA_0002_0000, 0xA002),
    (0x08, 0x2000, 0x0000_7F00_0030_0000, 0x1236, 512, 0x0000_55AA_0003_0000, 0xA003),
];
/// §10.2: a single-send input, an in-place region, an output and an internal region.
#[rustfmt::skip]
const B_REGIONS: [Region; 4] = [
    (0x06, 0x1000_2000, 0x0000_7F00_000A_0000, 0x0001_0001, 64, 0x0000_55BB_0000_1000, 0xB001),
    (0x0C, 0x1000_3000, 0x0000_7F00_000B_0000, 0x0001_0002, 1000, 0x0000_55BB_0000_2000, 0xB002),
    (0x08, 0x1000_4000, 0x0000_7F00_000C_0000, 0x0001_0003, 256, 0x0000_55BB_0000_3000, 0xB003),
    (0x01, 0x1000_0000, 0, 0, 8192, 0, 0),
];
/// §10.3: one in-place region.
#[rustfmt::skip]
const C_REGION: Region = (0x0C, 0, 0x0000_7F00_0040_0000, 0x777, 4096, 0x0000_55CC_0000_0000, 0xC001);

/// The request records of `regions`, in order.
fn records(regions: &[Region]) -> Vec<RequestRecord> {
    let record = |&(flag_bits, requested, addr, rkey, size, ..): &Region| {
        req(flag_bits, requested, addr, rkey, size)
    };
    regions.iter().map(record).collect()
}

/// The Advertisement records of `regions`: all but the internal ones, in order.
fn adverts(regions: &[Region]) -> Vec<AdvertRecord> {
    regions
        .iter()
        .filter(|r| r.0 != 0x01)
        .map(|&(.., size, addr, rkey)| adv(addr, rkey, size))
        .collect()
}

/// Vector A's client table (AP2 style: offset 0, no internal regions).
fn a_table() -> Result<ClientRegions, RegionError> {
    let mut t = ClientRegions::new();
    let p0 = t.add_param(0x0000_7F00_0010_0000, 0x1234, 1024)?;
    let p1 = t.add_param(0x0000_7F00_0020_0000, 0x1235, 1024)?;
    let p2 = t.add_param(0x0000_7F00_0030_0000, 0x1236, 512)?;
    t.set_input(p0)?;
    t.set_input(p1)?;
    t.set_output(p2)?;
    Ok(t)
}

/// Vector B's client table (AP1: offset 0x1000_0000, one internal region).
fn b_table() -> Result<ClientRegions, RegionError> {
    let mut t = ClientRegions::new();
    let p0 = t.add_param(0x0000_7F00_000A_0000, 0x0001_0001, 64)?;
    let p1 = t.add_param(0x0000_7F00_000B_0000, 0x0001_0002, 1000)?;
    let p2 = t.add_param(0x0000_7F00_000C_0000, 0x0001_0003, 256)?;
    t.add_internal(8192)?;
    t.set_single_send(p0)?;
    t.set_input(p1)?;
    t.set_output(p1)?;
    t.set_output(p2)?;
    t.set_addr_offset(0x1000_0000);
    Ok(t)
}

/// Vector C's client table: one in-place region.
fn c_table() -> Result<ClientRegions, RegionError> {
    let mut t = ClientRegions::new();
    let p0 = t.add_param(0x0000_7F00_0040_0000, 0x777, 4096)?;
    t.set_input(p0)?;
    t.set_output(p0)?;
    Ok(t)
}

/// Emits the table's AAR with `emit_advertise_request` and returns the bytes.
fn emit_table(table: &ClientRegions) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let mut buf = [0xEEu8; 1024];
    let len = mrsp::emit_advertise_request(&mut buf, table.records()?)?;
    Ok(buf[..len].to_vec())
}

/// Emit of `repr` equals `wire`, parse of `wire` equals `repr`, `buffer_len` matches.
fn check_both_ways(repr: &Repr, wire: &[u8]) -> TestResult {
    let mut buf = [0xEEu8; 1024];
    let len = repr.emit(&mut buf)?;
    assert_eq!(len, wire.len(), "emitted length");
    assert_eq!(repr.buffer_len(), wire.len(), "buffer_len");
    assert_eq!(&buf[..len], wire, "emitted bytes");
    assert_eq!(buf[len], 0xEE, "emit wrote past the message");
    assert_eq!(&Repr::parse(wire)?, repr, "parsed representation");
    assert_eq!(repr.msg_type() as u8, wire[0]);
    Ok(())
}

type Checked<'w> = Result<Packet<&'w [u8]>, Box<dyn std::error::Error>>;

/// `repr` is `wire` both ways ([`check_both_ways`]), and the zero-copy view of `wire` has the
/// `header` (type, count, total length) and the records (or the error code) of `repr`.
fn check_message<'w>(repr: &Repr, wire: &'w [u8], header: (MsgType, u8, usize)) -> Checked<'w> {
    check_both_ways(repr, wire)?;
    let p = Packet::new_checked(wire)?;
    assert_eq!((p.msg_type(), p.count(), p.total_len()), header, "header");
    match repr {
        Repr::AdvertiseRequest(records) => {
            for (i, record) in records.iter().enumerate() {
                assert_eq!(p.request_record(i as u8), Some(Ok(*record)), "record {i}");
            }
        }
        Repr::Advertise(adverts) => {
            for (i, record) in adverts.iter().enumerate() {
                assert_eq!(p.advert_record(i as u8), Some(*record), "record {i}");
            }
        }
        Repr::Error(code) => assert_eq!(p.error_code(), Some(*code)),
    }
    Ok(p)
}

/// [`check_message`] for the AAR of `regions`.
fn check_request<'w>(regions: &[Region], wire: &'w [u8], count: u8, len: usize) -> Checked<'w> {
    let header = (MsgType::AdvertiseRequest, count, len);
    check_message(&aar_repr(&records(regions)), wire, header)
}

/// [`check_message`] for the Advertisement of `regions`.
fn check_advertisement(regions: &[Region], wire: &[u8], count: u8, len: usize) -> TestResult {
    let header = (MsgType::Advertise, count, len);
    check_message(&adv_repr(&adverts(regions)), wire, header)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// MRSP messages.

#[test]
fn vector_a_aar_from_region_table() -> TestResult {
    let table = a_table()?;
    assert_eq!(table.requested_addrs()?.as_slice(), &[0x0, 0x1000, 0x2000]);
    assert_eq!(emit_table(&table)?, A_AAR);
    check_both_ways(&aar_repr(&records(&A_REGIONS)), &A_AAR)
}

#[test]
fn vector_a_aar_packet_view() -> TestResult {
    let p = check_request(&A_REGIONS, &A_AAR, 3, 76)?;
    assert_eq!(p.error_code(), None);
    for i in 0..3 {
        assert_eq!(p.advert_record(i), None, "AAR has no advert records");
    }
    assert_eq!(p.request_record(3), None);
    assert_eq!(p.request_record(255), None);
    Ok(())
}

#[test]
fn vector_b_aar_from_region_table() -> TestResult {
    let table = b_table()?;
    // Internal first in the layout, last in the message (§2.5, §10.2).
    assert_eq!(
        table.requested_addrs()?.as_slice(),
        &[0x1000_2000, 0x1000_3000, 0x1000_4000, 0x1000_0000]
    );
    let flag_bytes: Vec<u8> = table.params().iter().map(|p| p.flags.bits()).collect();
    assert_eq!(flag_bytes, [0x06, 0x0C, 0x08]);
    assert_eq!(emit_table(&table)?, B_AAR);
    let p = check_request(&B_REGIONS, &B_AAR, 4, 100)?;
    assert_eq!(p.request_record(4), None);
    Ok(())
}

#[test]
fn vector_c_aar_from_region_table() -> TestResult {
    let table = c_table()?;
    assert_eq!(table.requested_addrs()?.as_slice(), &[0]);
    assert_eq!(emit_table(&table)?, C_AAR);
    check_request(&[C_REGION], &C_AAR, 1, 28)?;
    Ok(())
}

#[test]
fn vector_a_advertisement() -> TestResult {
    check_advertisement(&A_REGIONS, &A_ADV, 3, 52)?;
    let p = Packet::new_checked(&A_ADV[..])?;
    for i in 0..3 {
        assert_eq!(p.request_record(i), None);
    }
    assert_eq!(p.advert_record(3), None);
    // The emit_* helper produces the same bytes.
    let mut buf = [0u8; 64];
    let len = mrsp::emit_advertise(&mut buf, adverts(&A_REGIONS).into_iter())?;
    assert_eq!(&buf[..len], &A_ADV[..]);
    Ok(())
}

#[test]
fn vector_b_advertisement() -> TestResult {
    check_advertisement(&B_REGIONS, &B_ADV, 3, 52)
}

#[test]
fn vector_c_advertisement() -> TestResult {
    check_advertisement(&[C_REGION], &C_ADV, 1, 20)
}

#[test]
fn error_message() -> TestResult {
    let error = Repr::Error(MrspErrorCode::NotEnoughMemory);
    let p = check_message(&error, &ERR_01, (MsgType::Error, 0x01, 4))?;
    let mut buf = [0xEEu8; 8];
    assert_eq!(
        mrsp::emit_error(&mut buf, MrspErrorCode::NotEnoughMemory)?,
        4
    );
    assert_eq!(&buf[..4], &ERR_01[..]);
    check_both_ways(
        &Repr::Error(MrspErrorCode::InvalidAddress),
        &hex!("00020000"),
    )?;
    check_both_ways(
        &Repr::Error(MrspErrorCode::TooManyRegions),
        &hex!("00030000"),
    )?;

    assert_eq!(p.request_record(0), None);
    assert_eq!(p.advert_record(0), None);
    Ok(())
}

#[test]
fn error_message_stale_padding_is_ignored() -> TestResult {
    // §10.4: the C NAA leaves stale bytes in the padding.
    for pad in [hex!("0000"), hex!("0300"), hex!("abcd"), hex!("ffff")] {
        let wire = [0x00, 0x01, pad[0], pad[1]];
        assert_eq!(
            Repr::parse(&wire)?,
            Repr::Error(MrspErrorCode::NotEnoughMemory),
            "{pad:02x?}"
        );
        let p = Packet::new_checked(&wire[..])?;
        assert_eq!(p.error_code(), Some(MrspErrorCode::NotEnoughMemory));
        // Re-emitting clears the padding.
        let mut out = [0xEEu8; 4];
        Repr::parse(&wire)?.emit(&mut out)?;
        assert_eq!(out, ERR_01);
    }
    Ok(())
}

#[test]
fn header_padding_and_trailing_bytes_are_ignored() -> TestResult {
    for (wire, repr) in [
        (&A_AAR[..], aar_repr(&records(&A_REGIONS))),
        (&B_ADV[..], adv_repr(&adverts(&B_REGIONS))),
        (&ERR_01[..], Repr::Error(MrspErrorCode::NotEnoughMemory)),
    ] {
        let mut padded = wire.to_vec();
        padded[2] = 0x5A;
        padded[3] = 0xA5;
        padded.extend_from_slice(&[0xAB; 40]);
        assert_eq!(Repr::parse(&padded)?, repr);
        let p = Packet::new_checked(&padded[..])?;
        assert_eq!(
            p.total_len(),
            wire.len(),
            "trailing bytes are not part of the message"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Immediates (§3.2, §3.7, §10.5).

fn fncode(code: u8) -> FunctionCode {
    FunctionCode::new(code).expect("valid function code")
}

#[test]
fn request_immediates_encode() {
    // §3.2 default example / §10.1.
    let v = encode_request(fncode(1), [0; 3]);
    assert_eq!(v, 0x0000_0081);
    assert_eq!(v.to_be_bytes(), hex!("00000081"));
    // §10.2: fncode 2, user bytes {0x11, 0x22, 0x33}.
    let v = encode_request(fncode(2), [0x11, 0x22, 0x33]);
    assert_eq!(v, 0x3322_1182);
    assert_eq!(v.to_be_bytes(), hex!("33221182"));
    // §10.3: fncode 3.
    let v = encode_request(fncode(3), [0; 3]);
    assert_eq!(v, 0x0000_0083);
    assert_eq!(v.to_be_bytes(), hex!("00000083"));
    // 127 is the largest code; the marker does not clobber it.
    assert_eq!(
        encode_request(fncode(127), [0; 3]).to_be_bytes(),
        hex!("000000ff")
    );
    assert_eq!(FunctionCode::new(0), None);
    assert_eq!(FunctionCode::new(128), None);
}

#[test]
fn request_immediates_server_decode_table() {
    // §10.5, server side: (wire bytes, expected decode).
    let call = |fncode, user| Request::Call { fncode, user };
    let rows: [([u8; 4], Request); 5] = [
        (hex!("00000081"), call(1, [0, 0, 0])),
        (hex!("33221182"), call(2, [0x11, 0x22, 0x33])),
        (hex!("00000001"), call(1, [0, 0, 0])),
        (hex!("000000ff"), call(127, [0, 0, 0])),
        (hex!("00000000"), Request::ClientError),
    ];
    for (wire, expected) in rows {
        let value = u32::from_be_bytes(wire);
        assert_eq!(Request::decode(value), expected, "{value:#010x}");
    }
    // The user word the C NAA keeps for kernels: value & 0xFFFF_FF00.
    assert_eq!(Request::user_word([0x11, 0x22, 0x33]), 0x3322_1100);
    assert_eq!(Request::user_word([0, 0, 0]), 0);
    // The other direction: encode reproduces the marked rows.
    assert_eq!(
        encode_request(fncode(1), [0; 3]).to_be_bytes(),
        hex!("00000081")
    );
    assert_eq!(
        encode_request(fncode(2), [0x11, 0x22, 0x33]).to_be_bytes(),
        hex!("33221182")
    );
}

#[test]
fn return_code_immediates_client_decode_table() {
    // §10.5, client side: (wire bytes, full 24-bit code, naa_error u8).
    let rows: [([u8; 4], u32, u8); 5] = [
        (hex!("00000000"), 0x00, 0x00),
        (hex!("00000002"), 0x00, 0x00), // D-01: the C NAA's encoding is invisible.
        (hex!("00000200"), 0x02, 0x02),
        (hex!("00001081"), 0x10, 0x10),
        (hex!("12345600"), 0x12_3456, 0x56),
    ];
    for (wire, code, naa_error) in rows {
        let value = u32::from_be_bytes(wire);
        let rc = ReturnCode::from_imm(value);
        assert_eq!(rc.get(), code, "{value:#010x}");
        assert_eq!(rc.naa_error(), naa_error, "{value:#010x}");
        assert_eq!(rc.is_success(), code == 0);
    }
    assert_eq!(ReturnCode::from_imm(0x200), ReturnCode::KERNEL_TIMEOUT);
    assert_eq!(ReturnCode::from_imm(0x100), ReturnCode::SOCKET_UNAVAIL);
    // Encoding (§3.7 Rust requirement): rc << 8, low byte 0.
    assert_eq!(ReturnCode::SUCCESS.to_imm().to_be_bytes(), hex!("00000000"));
    assert_eq!(
        ReturnCode::KERNEL_TIMEOUT.to_imm().to_be_bytes(),
        hex!("00000200")
    );
    let app = ReturnCode::application(0x10).expect("application code");
    assert_eq!(app.to_imm().to_be_bytes(), hex!("00001000"));
    let wide = ReturnCode::new(0x12_3456).expect("24-bit code");
    assert_eq!(wide.to_imm().to_be_bytes(), hex!("12345600"));
    assert_eq!(ReturnCode::new(0x0100_0000), None);
    assert_eq!(ReturnCode::application(0x0F), None);
    assert_eq!(ReturnCode::application(0x80), None);
}

// ---------------------------------------------------------------------------------------------
// Negative cases.

#[test]
fn every_truncation_is_an_error() {
    let vectors: [&[u8]; 7] = [&A_AAR, &A_ADV, &B_AAR, &B_ADV, &C_AAR, &C_ADV, &ERR_01];
    for wire in vectors {
        for len in 0..wire.len() {
            let short = &wire[..len];
            let needed = if len < 4 { 4 } else { wire.len() };
            let expected = Error::Truncated { needed, len };
            assert_eq!(
                Repr::parse(short),
                Err(expected),
                "{:02x} truncated to {len}",
                wire[0]
            );
            assert_eq!(Packet::new_checked(short).err(), Some(expected));
        }
        assert!(Repr::parse(wire).is_ok());
    }
}

#[test]
fn reserved_and_unknown_types() {
    let mut wire = A_AAR;
    wire[0] = 0x03;
    assert_eq!(Repr::parse(&wire), Err(Error::ReservedType));
    assert_eq!(
        Packet::new_checked(&wire[..]).err(),
        Some(Error::ReservedType)
    );
    assert_eq!(Repr::parse(&hex!("03000000")), Err(Error::ReservedType));
    for ty in [0x04u8, 0x10, 0x7F, 0x80, 0xFF] {
        wire[0] = ty;
        assert_eq!(Repr::parse(&wire), Err(Error::UnknownType(ty)));
        assert_eq!(
            Packet::new_checked(&wire[..]).err(),
            Some(Error::UnknownType(ty))
        );
    }
    assert_eq!(MsgType::from_byte(0x03), Err(Error::ReservedType));
}

#[test]
fn count_above_32_is_too_many_records() {
    for (ty, rec_len) in [(0x01u8, 24usize), (0x02, 16)] {
        // A complete 33-record message is still refused; so is a header alone.
        let mut wire = vec![0u8; 4 + 33 * rec_len];
        wire[0] = ty;
        wire[1] = 33;
        assert_eq!(Repr::parse(&wire), Err(Error::TooManyRecords(33)));
        assert_eq!(Repr::parse(&wire[..4]), Err(Error::TooManyRecords(33)));
        assert_eq!(
            Packet::new_checked(&wire[..]).err(),
            Some(Error::TooManyRecords(33))
        );
        wire[1] = 255;
        assert_eq!(Repr::parse(&wire), Err(Error::TooManyRecords(255)));
        // 32 records (flags 0x00, all zero) are the maximum and accepted.
        wire[1] = 32;
        let repr = Repr::parse(&wire).expect("32 records");
        let n = match repr {
            Repr::AdvertiseRequest(r) => r.len(),
            Repr::Advertise(r) => r.len(),
            Repr::Error(_) => 0,
        };
        assert_eq!(n, MAX_REGIONS);
    }
}

#[test]
fn invalid_flag_bytes() {
    // Record 1 of vector A has flags at offset 4 + 24.
    for bad in [
        0x02u8, 0x03, 0x05, 0x07, 0x09, 0x0A, 0x0D, 0x0F, 0x10, 0x20, 0x40, 0x80, 0xFF,
    ] {
        let mut wire = A_AAR;
        wire[4 + 24] = bad;
        let expected = Error::InvalidFlags {
            index: 1,
            flags: bad,
        };
        assert_eq!(Repr::parse(&wire), Err(expected), "{bad:#04x}");
        // The view accepts the message; the record accessor reports the bad record.
        let p = Packet::new_checked(&wire[..]).expect("header is valid");
        assert_eq!(p.request_record(1), Some(Err(expected)));
        assert!(matches!(p.request_record(0), Some(Ok(_))));
    }
    // All valid combinations parse.
    for good in [0x00u8, 0x04, 0x06, 0x08, 0x0C, 0x0E] {
        let mut wire = A_AAR;
        wire[4 + 24] = good;
        assert!(Repr::parse(&wire).is_ok(), "{good:#04x}");
    }
}

#[test]
fn internal_record_must_not_publish_address_or_rkey() {
    // Record 3 of vector B is internal: published_addr at +8, rkey at +16.
    let rec = 4 + 3 * 24;
    for (offset, byte) in [(8usize, 0x01u8), (15, 0x01), (16, 0x80), (19, 0x01)] {
        let mut wire = B_AAR;
        wire[rec + offset] = byte;
        assert_eq!(
            Repr::parse(&wire),
            Err(Error::InvalidInternalRecord { index: 3 }),
            "offset {offset}"
        );
    }
    // A flag byte 0x01 on a record with an address is refused the same way.
    let mut wire = A_AAR;
    wire[4] = 0x01;
    assert_eq!(
        Repr::parse(&wire),
        Err(Error::InvalidInternalRecord { index: 0 })
    );
    // Emitting such a record from a Repr is not validated, but parsing it back fails.
    let bad = aar_repr(&[req(0x01, 0, 0x1000, 0, 64)]);
    let mut buf = [0u8; 28];
    bad.emit(&mut buf)
        .expect("emit does not check internal records");
    assert_eq!(
        Repr::parse(&buf),
        Err(Error::InvalidInternalRecord { index: 0 })
    );
}

#[test]
fn error_codes_outside_1_to_3_are_refused() {
    for code in [0x00u8, 0x04, 0x10, 0xFF] {
        let wire = [0x00, code, 0x00, 0x00];
        assert_eq!(Repr::parse(&wire), Err(Error::InvalidErrorCode(code)));
        assert_eq!(
            Packet::new_checked(&wire[..]).err(),
            Some(Error::InvalidErrorCode(code))
        );
        assert_eq!(
            MrspErrorCode::from_byte(code),
            Err(Error::InvalidErrorCode(code))
        );
    }
}

#[test]
fn requested_address_must_fit_56_bits() -> TestResult {
    let max = NAA_ADDR_LIMIT - 1;
    let mut buf = [0u8; 28];
    let ok = aar_repr(&[req(0x04, max, 1, 2, 3)]);
    ok.emit(&mut buf)?;
    assert_eq!(&buf[4..12], &hex!("04ffffffffffffff"));
    assert_eq!(Repr::parse(&buf)?, ok);
    for too_large in [NAA_ADDR_LIMIT, NAA_ADDR_LIMIT + 5, u64::MAX] {
        let bad = aar_repr(&[req(0x04, too_large, 1, 2, 3)]);
        assert_eq!(
            bad.emit(&mut buf),
            Err(Error::AddressTooLarge),
            "{too_large:#x}"
        );
        let bad_rec = [req(0x04, too_large, 1, 2, 3)];
        assert_eq!(
            mrsp::emit_advertise_request(&mut buf, bad_rec.into_iter()),
            Err(Error::AddressTooLarge)
        );
    }
    // A region table whose layout leaves the 56-bit space cannot produce records.
    let mut t = ClientRegions::new();
    t.add_param(0, 0, 4096)?;
    t.add_param(0, 0, 4096)?;
    t.set_addr_offset(NAA_ADDR_LIMIT - 4096);
    assert!(matches!(t.records(), Err(RegionError::AddressOverflow)));
    Ok(())
}

#[test]
fn emit_into_a_short_buffer_is_truncated() {
    let cases = [
        (aar_repr(&records(&A_REGIONS)), 76usize),
        (aar_repr(&records(&B_REGIONS)), 100),
        (adv_repr(&adverts(&A_REGIONS)), 52),
        (adv_repr(&adverts(&[C_REGION])), 20),
        (Repr::Error(MrspErrorCode::TooManyRegions), 4),
    ];
    for (repr, needed) in cases {
        for len in 0..needed {
            let mut buf = vec![0u8; len];
            assert_eq!(
                repr.emit(&mut buf),
                Err(Error::Truncated { needed, len }),
                "{len}/{needed}"
            );
        }
        let mut buf = vec![0u8; needed];
        assert_eq!(repr.emit(&mut buf), Ok(needed));
    }
}

#[test]
fn emit_more_than_32_records_is_refused() {
    let recs = vec![req(0x04, 0, 1, 2, 3); MAX_REGIONS + 1];
    let mut buf = [0u8; 4 + 33 * 24];
    assert_eq!(
        mrsp::emit_advertise_request(&mut buf, recs.into_iter()),
        Err(Error::TooManyRecords(33))
    );
    let advs = vec![adv(1, 2, 3); 300];
    assert_eq!(
        mrsp::emit_advertise(&mut buf, advs.into_iter()),
        Err(Error::TooManyRecords(255))
    );
}

// ---------------------------------------------------------------------------------------------
// The machines reproduce the wire traces of §10.1 and §10.2.

const T0: Instant = Instant::ZERO;
const BUF_LEN: usize = naaice_core::config::MRSP_RECV_LEN;

/// The machine's actions until it has none left.
fn drain<M: Machine>(m: &mut M, buf: &mut [u8]) -> Vec<Action>
where
    M::Action: Into<Action>,
{
    let mut out = Vec::new();
    while let Some(a) = m.poll_action(buf) {
        out.push(a.into());
        let machine = std::any::type_name::<M>();
        assert!(out.len() < 100, "{machine} keeps producing actions");
    }
    out
}

fn writes(actions: &[Action]) -> Vec<Write> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Write(w) => Some(*w),
            _ => None,
        })
        .collect()
}

/// The only write among `actions`.
fn only_write(actions: &[Action]) -> Write {
    let w = writes(actions);
    assert_eq!(w.len(), 1, "{actions:?}");
    w[0]
}

/// Where a write goes: its length, remote address and rkey.
fn target(w: &Write) -> (u32, u64, u32) {
    (w.len, w.remote_addr, w.rkey)
}

/// Everything about the writes `w` but their work request ids: region, length, remote address,
/// rkey, immediate and solicited event.
fn fields(w: &[Write]) -> Vec<(RegionId, u32, u64, u32, Option<u32>, bool)> {
    w.iter()
        .map(|w| (w.region, w.len, w.remote_addr, w.rkey, w.imm, w.solicited))
        .collect()
}

/// The final write of a call (or the NAA's reply) arrived in receive `wr_id`.
fn write_imm(wr_id: WrId, imm: u32, len: u32) -> Input<'static> {
    Input::WriteImmReceived { wr_id, imm, len }
}

/// Brings a client through the MRSP with `adv` as the NAA's answer; checks the AAR it sends.
/// Also returns the receive the client posted ahead for its first RPC's reply.
fn client_mrsp(
    table: ClientRegions,
    config: ClientConfig,
    aar: &[u8],
    adv: &[u8],
) -> (Client, WrId) {
    let mut buf = [0u8; BUF_LEN];
    let mut c = Client::new(config, table);
    c.handle_input(T0, Input::AddressResolved);
    c.handle_input(T0, Input::Established);
    c.start_mrsp(T0).expect("start_mrsp");
    let actions = drain(&mut c, &mut buf);
    let [
        Action::PostRecv {
            wr_id: recv,
            buffer: RecvBuffer::Message,
        },
        Action::Send { wr_id: send, len },
    ] = actions[..]
    else {
        panic!("unexpected MRSP actions {actions:?}");
    };
    assert_eq!(&buf[..len], aar, "the client's AAR");
    c.handle_input(T0, Input::SendCompleted(send));
    assert_eq!(c.phase(), Phase::MrspReceiving);
    c.handle_input(
        T0,
        Input::Received {
            wr_id: recv,
            data: adv,
        },
    );
    let done = drain(&mut c, &mut buf);
    let [
        Action::PostRecv {
            wr_id: spare,
            buffer: RecvBuffer::Empty,
        },
        Action::MrspComplete,
    ] = done[..]
    else {
        panic!("the first reply's receive is posted with the MRSP's end: {done:?}");
    };
    assert_eq!(c.phase(), Phase::MrspDone);
    (c, spare)
}

/// The receive an RPC's start posts after its writes, for the next RPC's reply (its own
/// reply's was posted ahead, spec §3.9).
fn next_reply_recv(actions: &[Action]) -> WrId {
    let Some((
        &Action::PostRecv {
            wr_id,
            buffer: RecvBuffer::Empty,
        },
        rest,
    )) = actions.split_last()
    else {
        panic!("the next reply's receive comes last: {actions:?}");
    };
    assert!(
        rest.iter().all(|a| matches!(a, Action::Write(_))),
        "only the writes before it: {actions:?}"
    );
    wr_id
}

/// Completes the client's writes `w`, then the NAA's reply (return code 0, `len` bytes)
/// arrives in `recv`: the RPC's result is the client's only action.
fn complete_rpc(c: &mut Client, w: &[Write], recv: WrId, len: u32) -> RpcResult {
    for x in w {
        c.handle_input(T0, Input::WriteCompleted(x.wr_id));
    }
    c.handle_input(T0, write_imm(recv, 0, len));
    let done = drain(c, &mut [0u8; BUF_LEN]);
    let [Action::RpcComplete(r)] = done[..] else {
        panic!("{done:?}")
    };
    r
}

#[test]
fn vector_a_client_machine() -> TestResult {
    let (mut c, mut next) = client_mrsp(a_table()?, ClientConfig::new(fncode(1)), &A_AAR, &A_ADV);
    assert_eq!(c.remote_regions(), adverts(&A_REGIONS));
    let mut buf = [0u8; BUF_LEN];
    for rpc in 1..=2 {
        c.start_rpc(T0, c.config().rpc_args())?;
        let actions = drain(&mut c, &mut buf);
        let recv = next;
        next = next_reply_recv(&actions);
        let w = writes(&actions);
        let expected = [
            (
                RegionId::new(0),
                1024,
                0x0000_55AA_0001_0000,
                0xA001,
                None,
                false,
            ),
            (
                RegionId::new(1),
                1024,
                0x0000_55AA_0002_0000,
                0xA002,
                Some(0x81),
                true,
            ),
        ];
        assert_eq!(fields(&w), expected, "RPC {rpc}");
        let r = complete_rpc(&mut c, &w, recv, 512);
        assert_eq!(
            (r.status, r.bytes_received, r.rpc),
            (ReturnCode::SUCCESS, 512, rpc)
        );
        assert_eq!(c.phase(), Phase::Finished);
    }
    Ok(())
}

#[test]
fn client_machine_decodes_reply_immediates() -> TestResult {
    // §10.5 client table, through the machine (reply byte_len 512).
    for (value, naa_error) in [
        (0x0000_0000u32, 0u8),
        (0x0000_0002, 0),
        (0x0000_0200, 2),
        (0x0000_1081, 0x10),
        (0x1234_5600, 0x56),
    ] {
        let (mut c, recv) = client_mrsp(c_table()?, ClientConfig::new(fncode(3)), &C_AAR, &C_ADV);
        let mut buf = [0u8; BUF_LEN];
        c.start_rpc(T0, c.config().rpc_args())?;
        let actions = drain(&mut c, &mut buf);
        next_reply_recv(&actions);
        // §10.3: a single WRITE WITH IMM of 4096 bytes, wire 00 00 00 83.
        let w = only_write(&actions);
        assert_eq!(target(&w), (4096, 0x0000_55CC_0000_0000, 0xC001));
        assert_eq!(w.imm.map(u32::to_be_bytes), Some(hex!("00000083")));
        // The reply may overtake the write completion (D-20).
        c.handle_input(T0, write_imm(recv, value, 512));
        c.handle_input(T0, Input::WriteCompleted(w.wr_id));
        let done = drain(&mut c, &mut buf);
        let [Action::RpcComplete(r)] = done[..] else {
            panic!("{value:#x}: {done:?}")
        };
        assert_eq!(r.status.naa_error(), naa_error, "{value:#010x}");
        assert_eq!(r.bytes_received, 512);
        assert_eq!(
            c.phase(),
            Phase::Finished,
            "a non-zero code still finishes the RPC"
        );
    }
    Ok(())
}

#[test]
fn vector_b_client_machine() -> TestResult {
    let mut config = ClientConfig::new(fncode(2));
    config.rpc_timeout = Duration::from_secs(1);
    let (mut c, recv) = client_mrsp(b_table()?, config, &B_AAR, &B_ADV);
    let args = RpcArgs {
        user: [0x11, 0x22, 0x33],
        ..config.rpc_args()
    };
    let mut buf = [0u8; BUF_LEN];

    // RPC 1: p0 (single-send) and p1 WITH IMM 33 22 11 82.
    c.start_rpc(T0, args)?;
    let actions = drain(&mut c, &mut buf);
    let next = next_reply_recv(&actions);
    let w = writes(&actions);
    assert_eq!(w.len(), 2);
    assert_eq!(target(&w[0]), (64, 0x0000_55BB_0000_1000, 0xB001));
    assert_eq!(w[0].imm, None);
    assert_eq!(target(&w[1]), (1000, 0x0000_55BB_0000_2000, 0xB002));
    assert_eq!(w[1].imm.map(u32::to_be_bytes), Some(hex!("33221182")));
    assert!(w[1].solicited);
    let r = complete_rpc(&mut c, &w, recv, 256);
    assert_eq!(r.bytes_received, 256);

    // RPC 2: p0 is dropped; only p1 WITH IMM.
    c.start_rpc(T0, args)?;
    let actions = drain(&mut c, &mut buf);
    let w = only_write(&actions);
    assert_eq!(target(&w), (1000, 0x0000_55BB_0000_2000, 0xB002));
    assert_eq!(w.imm.map(u32::to_be_bytes), Some(hex!("33221182")));
    let recv = next;
    let next = next_reply_recv(&actions);

    // RPC 3: posting the reply receive fails -> the error write of §3.5 / §10.2. The receive
    // posted ahead for it was refused (only forgotten), so RPC 3 posts its own before its
    // writes, and that fails too.
    c.handle_input(T0, Input::PostFailed(next));
    assert_eq!(drain(&mut c, &mut buf), []);
    complete_rpc(&mut c, &[w], recv, 256);
    c.start_rpc(T0, args)?;
    let actions = drain(&mut c, &mut buf);
    let Some(&Action::PostRecv { wr_id: recv, .. }) = actions.first() else {
        panic!()
    };
    c.handle_input(T0, Input::PostFailed(recv));
    let actions = drain(&mut c, &mut buf);
    let w = only_write(&actions);
    assert_eq!(target(&w), (0, 0x0000_55BB_0000_1000, 0xB001));
    assert_eq!(w.imm.map(u32::to_be_bytes), Some(hex!("00000000")));
    assert!(w.solicited);
    assert!(matches!(
        actions.last(),
        Some(Action::Failed(MachineError::PostFailed(_)))
    ));
    assert_eq!(c.phase(), Phase::Error);
    Ok(())
}

/// Brings a server through the MRSP: receives `aar`, assigns `local` memory in order, checks
/// the Advertisement it sends equals `adv`. Returns the server and its data receives.
fn server_mrsp(
    kernels: KernelSet,
    aar: &[u8],
    local: &[(u64, u32)],
    adv: &[u8],
) -> (Server, Vec<WrId>) {
    let mut buf = [0u8; BUF_LEN];
    let mut s = Server::new(ServerConfig::new(kernels), T0);
    let first = drain(&mut s, &mut buf);
    let [
        Action::PostRecv {
            wr_id: recv,
            buffer: RecvBuffer::Message,
        },
    ] = first[..]
    else {
        panic!("{first:?}")
    };
    s.handle_input(T0, Input::Established);
    s.handle_input(
        T0,
        Input::Received {
            wr_id: recv,
            data: aar,
        },
    );
    let allocs = drain(&mut s, &mut buf);
    assert_eq!(allocs.len(), local.len(), "{allocs:?}");
    let parsed = Repr::parse(aar).expect("vector parses");
    let Repr::AdvertiseRequest(records) = parsed else {
        panic!()
    };
    for (i, a) in allocs.iter().enumerate() {
        let Action::Allocate(Allocation {
            region,
            size,
            requested_addr,
            internal,
        }) = *a
        else {
            panic!("{a:?}")
        };
        assert_eq!(region, RegionId::new(i as u8));
        assert_eq!(
            (size, requested_addr),
            (records[i].size, records[i].requested_addr)
        );
        assert_eq!(internal, records[i].flags == RegionFlags::INTERNAL);
    }
    for (i, &(addr, rkey)) in local.iter().enumerate() {
        s.region_assigned(T0, RegionId::new(i as u8), addr, rkey)
            .expect("assign");
    }
    let actions = drain(&mut s, &mut buf);
    let recvs: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::PostRecv {
                wr_id,
                buffer: RecvBuffer::Empty,
            } => Some(*wr_id),
            _ => None,
        })
        .collect();
    assert_eq!(
        recvs.len(),
        2,
        "a data receive and a spare (§2.9): {actions:?}"
    );
    let Some(&Action::Send { wr_id: send, len }) = actions.last() else {
        panic!("{actions:?}")
    };
    assert_eq!(&buf[..len], adv, "the server's Advertisement");
    s.handle_input(T0, Input::SendCompleted(send));
    assert_eq!(drain(&mut s, &mut buf), [Action::MrspComplete]);
    assert_eq!(s.phase(), Phase::MrspDone);
    (s, recvs)
}

/// [`server_mrsp`], then the first call's final write arrives with `imm` and `len` bytes;
/// returns the server and its actions.
fn server_first_call(
    kernels: KernelSet,
    aar: &[u8],
    local: &[(u64, u32)],
    adv: &[u8],
    imm: u32,
    len: u32,
) -> (Server, Vec<Action>) {
    let (mut s, recvs) = server_mrsp(kernels, aar, local, adv);
    s.handle_input(T0, write_imm(recvs[0], imm, len));
    let actions = drain(&mut s, &mut [0u8; BUF_LEN]);
    (s, actions)
}

fn run_kernel(fncode: u8, user: [u8; 3], rpc: u32) -> Action {
    Action::RunKernel(KernelCall { fncode, user, rpc })
}

#[test]
fn vector_a_server_machine() {
    let local = [
        (0x0000_55AA_0001_0000, 0xA001),
        (0x0000_55AA_0002_0000, 0xA002),
        (0x0000_55AA_0003_0000, 0xA003),
    ];
    let kernels = KernelSet::empty().with(fncode(1));
    let imm = u32::from_be_bytes(hex!("00000081"));
    let (mut s, actions) = server_first_call(kernels, &A_AAR, &local, &A_ADV, imm, 1024);
    assert_eq!(actions, [run_kernel(1, [0; 3], 1)]);
    s.kernel_finished(T0, ReturnCode::SUCCESS)
        .expect("kernel_finished");
    let w = only_write(&drain(&mut s, &mut [0u8; BUF_LEN]));
    let expected = (
        RegionId::new(2),
        512,
        0x0000_7F00_0030_0000,
        0x1236,
        Some(0),
        true,
    );
    assert_eq!(fields(&[w]), [expected]);
    s.handle_input(T0, Input::WriteCompleted(w.wr_id));
    assert_eq!(s.phase(), Phase::DataReceiving);
}

#[test]
fn vector_b_server_machine() {
    let local = [
        (0x0000_55BB_0000_1000, 0xB001),
        (0x0000_55BB_0000_2000, 0xB002),
        (0x0000_55BB_0000_3000, 0xB003),
        (0x0000_55BB_0001_0000, 0), // internal: not advertised
    ];
    let kernels = KernelSet::empty().with(fncode(2));
    let imm = u32::from_be_bytes(hex!("33221182"));
    let (mut s, actions) = server_first_call(kernels, &B_AAR, &local, &B_ADV, imm, 1000);
    assert_eq!(actions, [run_kernel(2, [0x11, 0x22, 0x33], 1)]);
    s.kernel_finished(T0, ReturnCode::SUCCESS)
        .expect("kernel_finished");
    let w = writes(&drain(&mut s, &mut [0u8; BUF_LEN]));
    let expected = [
        (
            RegionId::new(1),
            1000,
            0x0000_7F00_000B_0000,
            0x0001_0002,
            None,
            false,
        ),
        (
            RegionId::new(2),
            256,
            0x0000_7F00_000C_0000,
            0x0001_0003,
            Some(0),
            true,
        ),
    ];
    assert_eq!(fields(&w), expected);
}

#[test]
fn server_machine_decodes_request_immediates() {
    let local = [(0x0000_55CC_0000_0000, 0xC001)];
    let kernels = KernelSet::empty().with(fncode(1));
    let first_call = |imm, len| server_first_call(kernels, &C_AAR, &local, &C_ADV, imm, len);

    // 0x00000001: fncode 1 without the marker still runs kernel 1.
    let (_, actions) = first_call(0x0000_0001, 4096);
    assert_eq!(actions, [run_kernel(1, [0; 3], 1)]);

    // 0x000000FF: fncode 127, no kernel -> SOCKET_UNAVAIL (wire 00 00 01 00), zero length.
    let (_, actions) = first_call(0x0000_00FF, 4096);
    let w = only_write(&actions);
    assert_eq!(w.imm.map(u32::to_be_bytes), Some(hex!("00000100")));
    assert_eq!(target(&w), (0, 0x0000_7F00_0040_0000, 0x777));

    // 0x00000000: the client's error signal.
    let (s, actions) = first_call(0, 0);
    assert_eq!(
        actions,
        [
            Action::Failed(MachineError::ClientSignalledError),
            Action::Disconnect
        ]
    );
    assert_eq!(s.phase(), Phase::Error);
}

/// A new server without kernels that received `aar` in its MRSP receive; returns its actions.
fn server_received(aar: &[u8], buf: &mut [u8]) -> (Server, Vec<Action>) {
    let mut s = Server::new(ServerConfig::new(KernelSet::empty()), T0);
    let first = drain(&mut s, buf);
    let [
        Action::PostRecv {
            wr_id,
            buffer: RecvBuffer::Message,
        },
    ] = first[..]
    else {
        panic!("{first:?}")
    };
    s.handle_input(T0, Input::Received { wr_id, data: aar });
    let actions = drain(&mut s, buf);
    (s, actions)
}

#[test]
fn server_refusal_sends_vector_error_message() {
    // 33 records are refused with code 0x03; a failed allocation with 0x01 (§10.4 bytes).
    let mut buf = [0u8; BUF_LEN];
    let (mut s, allocs) = server_received(&A_AAR, &mut buf);
    assert_eq!(allocs.len(), 3);
    s.assignment_failed(T0, RegionId::new(0))
        .expect("assignment_failed");
    let actions = drain(&mut s, &mut buf);
    let [Action::Send { wr_id: send, len }] = actions[..] else {
        panic!("{actions:?}")
    };
    assert_eq!(&buf[..len], &ERR_01[..]);
    s.handle_input(T0, Input::SendCompleted(send));
    let actions = drain(&mut s, &mut buf);
    assert_eq!(
        actions,
        [
            Action::Failed(MachineError::MrspRejected(MrspErrorCode::NotEnoughMemory)),
            Action::Disconnect
        ]
    );

    let mut big = vec![0u8; 4 + 33 * 24];
    big[0] = 0x01;
    big[1] = 33;
    let (_, actions) = server_received(&big, &mut buf);
    let [Action::Send { len, .. }] = actions[..] else {
        panic!("{actions:?}")
    };
    assert_eq!(&buf[..len], &hex!("00030000"));
}
