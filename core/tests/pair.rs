//! Two-peer simulation tests: a [`Client`] and a [`Server`] talk to each other through the
//! in-memory RC link of [`naaice_core::testkit::pair`], with region memory, reference kernels and a virtual clock.
//!
//! Every test asserts the exact action sequence of both machines where it matters, their final
//! phases and the bytes that end up in the client's (and the NAA's) regions.
//!
//! 1. Happy path (vector B regions): MRSP bytes, three RPCs, single-send, in-place, internal,
//!    user bytes, return-code immediates, `bytes_received`, receive accounting.
//! 2. MRSP refusals and malformed messages (D-17: the error SEND completes before teardown).
//! 3. RPC return codes: unknown function code (D-02), kernel timeout, application codes.
//! 4. Zero-input and zero-output RPCs (D-08).
//! 5. Reordering (D-20), early requests, late ESTABLISHED.
//! 6. Timeouts, disconnects, failed work requests, the client's error write (D-07).
//! 7. Commands in the wrong phase.

use core::time::Duration;

use hex_literal::hex;
use naaice_core::machine::{Error, KernelSet, Machine, Placement, RecvBuffer, RpcArgs, WorkError};
use naaice_core::testkit::AnyAction as Action;
use naaice_core::testkit::pair::{
    Act, AllocMode, CLIENT_RKEY, CLIENT_VA, KernelMode, Pair, SERVER_RKEY, SERVER_VA, Side,
};
use naaice_core::wire::imm::encode_request;
use naaice_core::wire::mrsp::{AdvertRecord, MrspErrorCode};
use naaice_core::wire::{self, FunctionCode};
use naaice_core::{ClientConfig, Input, Instant, Phase, RegionId, ReturnCode, ServerConfig};

/// §10.2 AAR, 100 bytes.
const B_AAR: [u8; 100] = hex!(
    "01040000060000001000200000007f00000a000000010001000000400c0000001000300000007f00000b000000010002000003e8080000001000400000007f00000c00000001000300000100010000001000000000000000000000000000000000002000"
);
/// §10.2 Advertisement, 52 bytes.
const B_ADV: [u8; 52] = hex!(
    "02030000000055bb000010000000b00100000040000055bb000020000000b002000003e8000055bb000030000000b00300000100"
);

/// Vector B's parameters (spec §10.2): single-send input, in-place, output.
const B_PARAMS: [(u32, u8); 3] = [(64, 0x06), (1000, 0x0C), (256, 0x08)];
/// Vector B's internal region.
const B_INTERNAL: [u32; 1] = [8192];
/// Vector B's records in total bytes.
const B_TOTAL: u64 = 64 + 1000 + 256 + 8192;

const RECV_MSG: Act = Act::Recv(RecvBuffer::Message);
const RECV: Act = Act::Recv(RecvBuffer::Empty);
const ALLOC_B: [Act; 4] = [
    Act::Alloc {
        region: 0,
        size: 64,
        internal: false,
    },
    Act::Alloc {
        region: 1,
        size: 1000,
        internal: false,
    },
    Act::Alloc {
        region: 2,
        size: 256,
        internal: false,
    },
    Act::Alloc {
        region: 3,
        size: 8192,
        internal: true,
    },
];

const fn fc(code: u8) -> FunctionCode {
    match FunctionCode::new(code) {
        Some(c) => c,
        None => panic!("invalid function code"),
    }
}

fn write(region: u8, len: u32, imm: Option<u32>) -> Act {
    Act::Write { region, len, imm }
}

fn done(status: ReturnCode, bytes: u32, rpc: u32) -> Act {
    Act::RpcComplete { status, bytes, rpc }
}

fn kernel(fncode: u8, user: [u8; 3], rpc: u32) -> Act {
    Act::Kernel { fncode, user, rpc }
}

fn secs(s: u64) -> Instant {
    Instant::from_millis(s * 1000)
}

fn server_config() -> ServerConfig {
    ServerConfig::new(KernelSet::empty().with(fc(1)).with(fc(2)).with(fc(3)))
}

/// Vector B's regions (requested addresses from 0x1000_0000) with function code `code`.
fn vector_b_with(code: u8, scfg: ServerConfig) -> Pair {
    let mut p = Pair::new(&B_PARAMS, &B_INTERNAL, ClientConfig::new(fc(code)), scfg);
    p.client
        .regions_mut()
        .expect("before MRSP")
        .set_addr_offset(0x1000_0000);
    p
}

fn vector_b(code: u8) -> Pair {
    vector_b_with(code, server_config())
}

/// `bytes` with `add` added to every byte.
fn plus(bytes: &[u8], add: u8) -> Vec<u8> {
    bytes.iter().map(|b| b.wrapping_add(add)).collect()
}

/// The imm the client puts on its final write with function code 1 and no user bytes.
fn imm1() -> u32 {
    encode_request(fc(1), [0; 3])
}

// ---------------------------------------------------------------------------------------------
// 1. Happy path

#[test]
fn happy_path_vector_b_mrsp_and_three_rpcs() {
    let mut p = vector_b(1);
    p.connect();
    // The server posts its MRSP receive before it accepts (spec §1.3).
    assert_eq!(p.take(Side::Server), [RECV_MSG]);
    assert_eq!(p.take(Side::Client), []);
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Connected, Phase::MrspReceiving)
    );

    p.client.start_mrsp(p.now).unwrap();
    p.run();
    assert_eq!(
        p.take(Side::Client),
        [RECV_MSG, Act::Send(100), RECV, Act::MrspComplete]
    );
    let mut expected = ALLOC_B.to_vec();
    expected.extend([RECV, RECV, Act::Send(52), Act::MrspComplete]);
    assert_eq!(p.take(Side::Server), expected);
    // Byte-exact §10.2 messages (the simulated buffers use the vector's addresses and rkeys).
    assert_eq!(p.cnic.sent, [B_AAR.to_vec()]);
    assert_eq!(p.snic.sent, [B_ADV.to_vec()]);
    let advert: Vec<_> = (0..3u32)
        .map(|i| AdvertRecord {
            addr: SERVER_VA + 0x1000 * u64::from(i),
            rkey: SERVER_RKEY + i,
            size: B_PARAMS[i as usize].0,
        })
        .collect();
    assert_eq!(p.client.remote_regions(), advert.as_slice());
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::MrspDone, Phase::MrspDone)
    );
    assert_eq!(
        (p.client.poll_timeout(), p.server.poll_timeout()),
        (None, None)
    );
    // The server: the first RPC's receive and a spare (spec §3.9); the client: the first
    // RPC's reply receive, posted ahead.
    assert_eq!((p.cnic.recvs.len(), p.snic.recvs.len()), (1, 2));

    let user = [0x11, 0x22, 0x33];
    p.user = user;
    let imm = encode_request(fc(1), user);
    assert_eq!(imm, 0x3322_1181);
    let p0 = p.cnic.mem(0).to_vec();
    let p1 = p.cnic.mem(1).to_vec();

    // RPC 1: both inputs, the last WITH IMM; outputs p1 (in place) and p2 come back.
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
    let client = p.take_actions(Side::Client);
    let server = p.take_actions(Side::Server);
    let compact = |a: &[Action]| a.iter().map(|&a| Act::from(a)).collect::<Vec<_>>();
    assert_eq!(
        compact(&client),
        [
            write(0, 64, None),
            write(1, 1000, Some(imm)),
            RECV,
            done(ReturnCode::SUCCESS, 256, 1)
        ]
    );
    assert_eq!(
        compact(&server),
        [
            kernel(1, user, 1),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV
        ]
    );
    let targets = |a: &[Action]| {
        a.iter()
            .filter_map(|a| match a {
                Action::Write(w) => Some((w.remote_addr, w.rkey)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        targets(&client),
        [
            (SERVER_VA, SERVER_RKEY),
            (SERVER_VA + 0x1000, SERVER_RKEY + 1)
        ]
    );
    assert_eq!(
        targets(&server),
        [
            (CLIENT_VA + 0x1_0000, CLIENT_RKEY + 1),
            (CLIENT_VA + 0x2_0000, CLIENT_RKEY + 2)
        ]
    );
    // Kernel 1 added 1 to every non-internal NAA region, inputs included (§5.3).
    assert_eq!(p.snic.mem(0), plus(&p0, 1));
    assert_eq!(p.cnic.mem(0), p0, "the client's input is not written back");
    assert_eq!(p.cnic.mem(1), plus(&p1, 1));
    assert_eq!(p.cnic.mem(2), [1; 256]);
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Finished, Phase::DataReceiving)
    );
    // Between RPCs: the client's receive posted ahead for RPC 2; the server's for RPC 2 and
    // its spare.
    assert_eq!((p.cnic.recvs.len(), p.snic.recvs.len()), (1, 2));

    // RPC 2: the single-send region is no longer written, so the NAA keeps its old contents.
    p.cnic.mem_mut(0).fill(0xEE);
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [
            write(1, 1000, Some(imm)),
            RECV,
            done(ReturnCode::SUCCESS, 256, 2)
        ]
    );
    assert_eq!(
        server,
        [
            kernel(1, user, 2),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV
        ]
    );
    assert_eq!(p.snic.mem(0), plus(&p0, 2));
    assert_eq!(p.cnic.mem(1), plus(&p1, 2));
    assert_eq!(p.cnic.mem(2), [2; 256]);

    // RPC 3 with new user bytes.
    let user = [0xA0, 0xB0, 0xC0];
    p.user = user;
    let imm = encode_request(fc(1), user);
    assert_eq!(imm, 0xC0B0_A081);
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [
            write(1, 1000, Some(imm)),
            RECV,
            done(ReturnCode::SUCCESS, 256, 3)
        ]
    );
    assert_eq!(
        server,
        [
            kernel(1, user, 3),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV
        ]
    );
    assert_eq!(p.snic.mem(0), plus(&p0, 3));
    assert_eq!(p.cnic.mem(0), [0xEE; 64]);
    assert_eq!(p.cnic.mem(1), plus(&p1, 3));
    assert_eq!(p.cnic.mem(2), [3; 256]);
    assert!(
        p.snic.mem(3).iter().all(|&b| b == 0),
        "internal region untouched"
    );

    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Finished, Phase::DataReceiving)
    );
    assert_eq!((p.client.rpc_count(), p.server.rpc_count()), (3, 3));
    // At least one receive was posted at every step since the Advertisement (§3.9): at
    // every final write-back the spare, for the client's next RPC; the receive that
    // replaces the call's is posted after the write-back.
    assert!(
        matches!(p.server_min_recvs, Some(n) if n >= 1),
        "{:?}",
        p.server_min_recvs
    );
    assert_eq!(p.recvs_at_reply, [1, 1, 1]);
    assert_eq!(
        (p.client.poll_timeout(), p.server.poll_timeout()),
        (None, None)
    );
}

#[test]
fn bytes_to_send_partial_and_zero_length_writes() {
    let mut p = vector_b(1);
    p.mrsp();
    let p0 = p.cnic.mem(0).to_vec();
    let p1 = p.cnic.mem(1).to_vec();
    let p1_id = RegionId::new(1);
    assert!(matches!(
        p.client.set_bytes_to_send(p1_id, Some(1001)),
        Err(Error::Region(
            naaice_core::region::RegionError::BytesToSendTooLarge { .. }
        ))
    ));
    p.client.set_bytes_to_send(p1_id, Some(10)).unwrap();
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [
            write(0, 64, None),
            write(1, 10, Some(imm1())),
            RECV,
            done(ReturnCode::SUCCESS, 256, 1)
        ]
    );
    // The NAA writes the full region back (§3.6): 10 bytes of input, the rest as it was, + 1.
    assert_eq!(
        server,
        [
            kernel(1, [0; 3], 1),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV
        ]
    );
    let mut expected = plus(&p1[..10], 1);
    expected.extend([1; 990]);
    assert_eq!(p.cnic.mem(1), expected);
    assert_eq!(p.snic.mem(0), plus(&p0, 1));

    p.client.set_bytes_to_send(p1_id, Some(0)).unwrap();
    let (client, _) = p.rpc();
    assert_eq!(
        client,
        [
            write(1, 0, Some(imm1())),
            RECV,
            done(ReturnCode::SUCCESS, 256, 2)
        ]
    );
    let mut expected = plus(&p1[..10], 2);
    expected.extend([2; 990]);
    assert_eq!(p.cnic.mem(1), expected);

    p.client.set_bytes_to_send(p1_id, None).unwrap();
    p.cnic.mem_mut(1).copy_from_slice(&p1);
    let (client, _) = p.rpc();
    assert_eq!(
        client,
        [
            write(1, 1000, Some(imm1())),
            RECV,
            done(ReturnCode::SUCCESS, 256, 3)
        ]
    );
    assert_eq!(p.cnic.mem(1), plus(&p1, 1));
}

#[test]
fn kernel_2_and_requested_placement_at_the_window_edges() {
    // The window holds exactly i0 (0x1000_0000, 8 KiB), p0, p1 and p2 (ends at 0x1000_4100).
    let mut scfg = server_config();
    scfg.placement = Placement::Requested {
        base: 0x1000_0000,
        len: 0x4100,
    };
    scfg.max_total_bytes = B_TOTAL;
    let mut p = vector_b_with(2, scfg);
    p.mrsp();
    let addrs: Vec<_> = p.client.remote_regions().iter().map(|r| r.addr).collect();
    assert_eq!(addrs, [0x1000_2000, 0x1000_3000, 0x1000_4000]);
    let p1 = p.cnic.mem(1).to_vec();
    let (client, server) = p.rpc();
    let imm = encode_request(fc(2), [0; 3]);
    assert_eq!(
        client,
        [
            write(0, 64, None),
            write(1, 1000, Some(imm)),
            RECV,
            done(ReturnCode::SUCCESS, 256, 1)
        ]
    );
    assert_eq!(
        server,
        [
            kernel(2, [0; 3], 1),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV
        ]
    );
    assert_eq!(p.cnic.mem(1), plus(&p1, 2));
    assert_eq!(p.cnic.mem(2), [2; 256]);
}

// ---------------------------------------------------------------------------------------------
// 2. MRSP error paths

/// Runs the MRSP against a refusing server. The error SEND must complete before the server
/// fails and disconnects (D-17); `server_before` is what the server does before its SEND.
/// The server reports the code as its error.
fn assert_refused(p: &mut Pair, code: MrspErrorCode, server_before: &[Act]) {
    assert_refused_because(p, code, server_before, Error::MrspRejected(code));
}

/// [`assert_refused`] where the server reports `cause` (the client gets only the code).
fn assert_refused_because(p: &mut Pair, code: MrspErrorCode, server_before: &[Act], cause: Error) {
    p.connect();
    assert_eq!(p.take(Side::Server), [RECV_MSG]);
    p.snic.hold_completions = true;
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    let client = p.take(Side::Client);
    assert!(
        matches!(client.as_slice(), [RECV_MSG, Act::Send(_), Act::Failed(Error::MrspRejected(c))] if *c == code),
        "{client:?}"
    );
    let mut expected = server_before.to_vec();
    expected.push(Act::Send(4));
    assert_eq!(p.take(Side::Server), expected);
    assert_eq!(p.snic.sent, [vec![0x00, code as u8, 0, 0]]);
    assert_eq!(
        p.server.phase(),
        Phase::MrspSending,
        "waits for its SEND to complete"
    );
    p.release(Side::Server);
    p.run();
    assert_eq!(p.take(Side::Server), [Act::Failed(cause), Act::Disconnect]);
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Error, Phase::Error)
    );
    assert_eq!(p.take(Side::Client), [], "the client already failed");
}

#[test]
fn mrsp_too_many_regions() {
    let mut scfg = server_config();
    scfg.max_regions = 3;
    let mut p = vector_b_with(1, scfg);
    let cause = Error::TooManyRegions { count: 4, max: 3 };
    assert_refused_because(&mut p, MrspErrorCode::TooManyRegions, &[], cause);
}

#[test]
fn mrsp_record_count_beyond_the_wire_limit() {
    let mut p = vector_b(1);
    p.cnic.hold_wire = true;
    p.connect();
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    p.cnic.send_in_flight()[1] = 40;
    p.cnic.hold_wire = false;
    p.run();
    assert_eq!(
        p.take(Side::Server),
        [
            RECV_MSG,
            Act::Send(4),
            Act::Failed(Error::Malformed(wire::Error::TooManyRecords(40))),
            Act::Disconnect
        ]
    );
    assert_eq!(
        p.take(Side::Client),
        [
            RECV_MSG,
            Act::Send(100),
            Act::Failed(Error::MrspRejected(MrspErrorCode::TooManyRegions))
        ]
    );
}

#[test]
fn mrsp_not_enough_memory_for_the_total() {
    let mut scfg = server_config();
    scfg.max_total_bytes = B_TOTAL - 1;
    let mut p = vector_b_with(1, scfg);
    assert_refused(&mut p, MrspErrorCode::NotEnoughMemory, &[]);
    // Exactly the limit is fine.
    let mut scfg = server_config();
    scfg.max_total_bytes = B_TOTAL;
    vector_b_with(1, scfg).mrsp();
}

#[test]
fn mrsp_requested_placement_outside_the_window() {
    let mut scfg = server_config();
    scfg.placement = Placement::Requested {
        base: 0x2000_0000,
        len: 0x10_0000,
    };
    let mut p = vector_b_with(1, scfg);
    assert_refused(&mut p, MrspErrorCode::InvalidAddress, &[]);
    // The first region (i0 at 0x1000_0000) starts one page before the window.
    let mut scfg = server_config();
    scfg.placement = Placement::Requested {
        base: 0x1000_1000,
        len: 0x10_0000,
    };
    let mut p = vector_b_with(1, scfg);
    assert_refused(&mut p, MrspErrorCode::InvalidAddress, &[]);
}

#[test]
fn mrsp_requested_placement_running_past_the_end() {
    let mut scfg = server_config();
    scfg.placement = Placement::Requested {
        base: 0x1000_0000,
        len: 0x40FF,
    };
    let mut p = vector_b_with(1, scfg);
    assert_refused(&mut p, MrspErrorCode::NotEnoughMemory, &[]);
}

#[test]
fn mrsp_requested_placement_overlap() {
    let mut scfg = server_config();
    scfg.placement = Placement::Requested {
        base: 0x1000_0000,
        len: 0x10_0000,
    };
    let mut p = vector_b_with(1, scfg);
    p.cnic.hold_wire = true;
    p.connect();
    p.take(Side::Server);
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    // Move p1 (record 1) into p0's page, 32 bytes after p0's start: they overlap.
    let msg = p.cnic.send_in_flight();
    let rec = 4 + 24;
    let word = (u64::from(msg[rec]) << 56) | 0x1000_2020;
    msg[rec..rec + 8].copy_from_slice(&word.to_be_bytes());
    p.cnic.hold_wire = false;
    p.run();
    let code = MrspErrorCode::InvalidAddress;
    assert_eq!(
        p.take(Side::Server),
        [
            Act::Send(4),
            Act::Failed(Error::MrspRejected(code)),
            Act::Disconnect
        ]
    );
    assert_eq!(
        p.take(Side::Client),
        [
            RECV_MSG,
            Act::Send(100),
            Act::Failed(Error::MrspRejected(code))
        ]
    );
}

#[test]
fn mrsp_assignment_failed() {
    let mut p = vector_b(1);
    p.alloc_mode = AllocMode::FailAt(1);
    assert_refused(&mut p, MrspErrorCode::NotEnoughMemory, &ALLOC_B[..2]);
}

#[test]
fn assignment_failed_only_for_regions_awaiting_memory() {
    let mut p = vector_b(1);
    p.alloc_mode = AllocMode::Manual;
    p.connect();
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    p.take(Side::Server);
    p.assign_next().unwrap();
    let wrong_phase = Err(Error::WrongPhase {
        phase: Phase::MrspReceiving,
    });
    assert_eq!(
        p.server.assignment_failed(p.now, RegionId::new(0)),
        wrong_phase,
        "region 0 already has its memory"
    );
    assert!(matches!(
        p.server.assignment_failed(p.now, RegionId::new(31)),
        Err(Error::Region(_))
    ));
    // Nothing was refused: the remaining regions still complete the MRSP.
    while p.assign_next().is_ok() && p.server.phase() == Phase::MrspReceiving {}
    p.run();
    assert_eq!(p.server.phase(), Phase::MrspDone);
}

/// Runs the MRSP with the client's AAR edited in flight by `edit`; returns the server's
/// actions after its MRSP receive.
fn corrupt_request(edit: impl FnOnce(&mut Vec<u8>)) -> (Pair, Vec<Act>) {
    let mut p = vector_b(1);
    p.cnic.hold_wire = true;
    p.connect();
    assert_eq!(p.take(Side::Server), [RECV_MSG]);
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    edit(p.cnic.send_in_flight());
    p.cnic.hold_wire = false;
    p.run();
    let server = p.take(Side::Server);
    (p, server)
}

/// Whatever is wrong with the request, the client gets an MRSP Error message with a code
/// (spec §11) before the NAA hangs up; the NAA reports the precise cause.
#[test]
fn mrsp_malformed_request() {
    type Edit = fn(&mut Vec<u8>);
    let invalid = MrspErrorCode::InvalidAddress;
    let cases: [(Edit, MrspErrorCode, Error); 9] = [
        (
            |m| m[4] = 0x03,
            invalid,
            Error::Malformed(wire::Error::InvalidFlags {
                index: 0,
                flags: 0x03,
            }),
        ),
        (
            |m| m[4] = 0xFF,
            invalid,
            Error::Malformed(wire::Error::InvalidFlags {
                index: 0,
                flags: 0xFF,
            }),
        ),
        (
            |m| m.truncate(50),
            invalid,
            Error::Malformed(wire::Error::Truncated {
                needed: 100,
                len: 50,
            }),
        ),
        (
            |m| m[0] = 0x03,
            invalid,
            Error::Malformed(wire::Error::ReservedType),
        ),
        (
            |m| m[0] = 0x07,
            invalid,
            Error::Malformed(wire::Error::UnknownType(0x07)),
        ),
        (
            |m| m[0] = 0x02,
            invalid,
            Error::UnexpectedMessage(wire::MsgType::Advertise),
        ),
        (|m| m[1] = 0, invalid, Error::NoParameterRegions),
        (
            // The first record becomes the internal one: only internal regions remain.
            |m| {
                m[1] = 1;
                m.truncate(4 + 24);
                m[4..28].fill(0);
                m[4] = 0x01;
                m[27] = 8;
            },
            invalid,
            Error::NoParameterRegions,
        ),
        (
            |m| m[4 + 20..4 + 24].fill(0),
            invalid,
            Error::RegionSize { region: 0, size: 0 },
        ),
    ];
    for (edit, code, cause) in cases {
        let (mut p, server) = corrupt_request(edit);
        assert_eq!(
            server,
            [Act::Send(4), Act::Failed(cause), Act::Disconnect],
            "{cause:?}"
        );
        assert_eq!(p.snic.sent.last(), Some(&vec![0x00, code as u8, 0, 0]));
        assert_eq!(p.server.phase(), Phase::Error);
        assert_eq!(
            p.take(Side::Client),
            [
                RECV_MSG,
                Act::Send(100),
                Act::Failed(Error::MrspRejected(code))
            ],
            "{cause:?}"
        );
        assert_eq!(p.client.phase(), Phase::Error);
    }
}

/// Regions over 1 GiB are refused with 0x01 (not enough memory), whatever the NAA's
/// per-connection limit.
#[test]
fn mrsp_region_over_one_gib() {
    let (p, server) = corrupt_request(|m| {
        m[4 + 20..4 + 24].copy_from_slice(&((1u32 << 30) + 1).to_be_bytes());
    });
    assert_eq!(p.snic.sent.last(), Some(&vec![0x00, 0x01, 0, 0]));
    assert_eq!(
        server,
        [
            Act::Send(4),
            Act::Failed(Error::RegionSize {
                region: 0,
                size: (1 << 30) + 1
            }),
            Act::Disconnect
        ]
    );
}

/// Runs the MRSP with the server's Advertisement edited in flight; returns the client's
/// actions. The server completed its MRSP; the test's client host then hangs up.
fn corrupt_advert(edit: impl FnOnce(&mut Vec<u8>)) -> Vec<Act> {
    let mut p = vector_b(1);
    p.snic.hold_wire = true;
    p.connect();
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    edit(p.snic.send_in_flight());
    p.snic.hold_wire = false;
    p.run();
    let client = p.take(Side::Client);
    assert_eq!(p.client.phase(), Phase::Error);
    assert_eq!(p.server.phase(), Phase::MrspDone);
    p.take(Side::Server);
    p.hang_up(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Server), [Act::Disconnect]);
    assert_eq!(p.server.phase(), Phase::Finished);
    client
}

#[test]
fn mrsp_bad_advertisement() {
    let count = corrupt_advert(|m| {
        m[1] = 2;
        m.truncate(4 + 2 * 16);
    });
    let size =
        corrupt_advert(|m| m[4 + 16 + 12..4 + 16 + 16].copy_from_slice(&999u32.to_be_bytes()));
    let addr =
        corrupt_advert(|m| m[4 + 32..4 + 40].copy_from_slice(&(u64::MAX - 100).to_be_bytes()));
    let truncated = corrupt_advert(|m| m.truncate(40));
    let prefix = [RECV_MSG, Act::Send(100)];
    let failed = |e| [prefix[0], prefix[1], Act::Failed(e)];
    assert_eq!(
        count,
        failed(Error::AdvertCountMismatch {
            expected: 3,
            got: 2
        })
    );
    assert_eq!(
        size,
        failed(Error::AdvertTooSmall {
            region: 1,
            advertised: 999,
            needed: 1000
        })
    );
    assert_eq!(addr, failed(Error::AdvertAddressOverflow { region: 2 }));
    assert_eq!(
        truncated,
        failed(Error::Malformed(wire::Error::Truncated {
            needed: 52,
            len: 40
        }))
    );
}

// ---------------------------------------------------------------------------------------------
// 3. RPC return codes

#[test]
fn unknown_function_code_is_answered_with_socket_unavail() {
    let mut p = vector_b(5);
    p.mrsp();
    let imm = encode_request(fc(5), [0; 3]);
    let before: Vec<_> = (0..3).map(|i| p.cnic.mem(i).to_vec()).collect();
    let unavail = ReturnCode::SOCKET_UNAVAIL.to_imm();
    assert_eq!(unavail, 0x100);
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [
            write(0, 64, None),
            write(1, 1000, Some(imm)),
            RECV,
            done(ReturnCode::SOCKET_UNAVAIL, 0, 1)
        ]
    );
    // No kernel; one zero-length write WITH IMM to the last output region (D-02).
    assert_eq!(server, [write(2, 0, Some(unavail)), RECV]);
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Finished, Phase::DataReceiving)
    );
    // The connection stays usable.
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [
            write(1, 1000, Some(imm)),
            RECV,
            done(ReturnCode::SOCKET_UNAVAIL, 0, 2)
        ]
    );
    assert_eq!(server, [write(2, 0, Some(unavail)), RECV]);
    let after: Vec<_> = (0..3).map(|i| p.cnic.mem(i).to_vec()).collect();
    assert_eq!(before, after, "no client buffer was written");
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Finished, Phase::DataReceiving)
    );
    assert_eq!(p.server.rpc_count(), 2);
}

#[test]
fn kernel_timeout_late_finish_and_a_waiting_rpc() {
    let mut p = vector_b(1);
    p.kernel_mode = KernelMode::Manual;
    p.mrsp();
    let p1 = p.cnic.mem(1).to_vec();
    let p2 = p.cnic.mem(2).to_vec();
    p.advance_to(secs(1));
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [write(0, 64, None), write(1, 1000, Some(imm1())), RECV]
    );
    assert_eq!(server, [kernel(1, [0; 3], 1)]);
    assert_eq!(p.server.phase(), Phase::Calculating);
    assert_eq!(p.server.poll_timeout(), Some(secs(11)));

    p.advance_to(secs(11) - Duration::from_micros(1));
    assert_eq!(
        (p.take(Side::Client), p.take(Side::Server)),
        (vec![], vec![])
    );
    p.advance_to(secs(11));
    let timeout = ReturnCode::KERNEL_TIMEOUT;
    assert_eq!(
        p.take(Side::Server),
        [write(2, 0, Some(timeout.to_imm())), RECV]
    );
    assert_eq!(p.take(Side::Client), [done(timeout, 0, 1)]);
    assert_eq!(
        (p.cnic.mem(1), p.cnic.mem(2)),
        (p1.as_slice(), p2.as_slice()),
        "outputs untouched"
    );
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Finished, Phase::DataReceiving)
    );
    assert!(p.server.kernel_running());

    // RPC 2 arrives while the stale kernel still runs: it waits.
    let (client, server) = p.rpc();
    assert_eq!(client, [write(1, 1000, Some(imm1())), RECV]);
    assert_eq!(server, []);
    assert_eq!(p.server.phase(), Phase::DataReceiving);

    // The late kernel_finished is accepted and writes nothing back; RPC 2 starts.
    p.advance(Duration::from_secs(1));
    p.finish_kernel(ReturnCode::SUCCESS).unwrap();
    p.run();
    assert_eq!(p.take(Side::Server), [kernel(1, [0; 3], 2)]);
    assert_eq!(p.take(Side::Client), []);
    assert_eq!(p.server.poll_timeout(), Some(secs(22)));
    p.finish_kernel(ReturnCode::SUCCESS).unwrap();
    p.run();
    assert_eq!(
        p.take(Side::Server),
        [write(1, 1000, None), write(2, 256, Some(0)), RECV]
    );
    assert_eq!(p.take(Side::Client), [done(ReturnCode::SUCCESS, 256, 2)]);
    // RPC 2's input landed before the stale kernel returned, so both kernels added 1.
    assert_eq!(p.cnic.mem(1), plus(&p1, 2));
    assert_eq!(p.cnic.mem(2), [2; 256]);
    assert!(!p.server.kernel_running());
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Finished, Phase::DataReceiving)
    );
}

#[test]
fn application_return_codes_come_with_the_outputs() {
    for code in [0x10, 0x42, 0x7F] {
        let rc = ReturnCode::application(code).unwrap();
        let mut p = vector_b(1);
        p.kernel_mode = KernelMode::Auto(rc);
        p.mrsp();
        let p1 = p.cnic.mem(1).to_vec();
        let (client, server) = p.rpc();
        assert_eq!(client[3], done(rc, 256, 1));
        assert_eq!(
            server,
            [
                kernel(1, [0; 3], 1),
                write(1, 1000, None),
                write(2, 256, Some(u32::from(code) << 8)),
                RECV
            ]
        );
        assert_eq!(p.cnic.mem(1), plus(&p1, 1));
        assert_eq!(p.cnic.mem(2), [1; 256]);
        assert_eq!(p.client.phase(), Phase::Finished);
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Zero inputs and zero outputs (D-08)

#[test]
fn all_inputs_single_send_second_rpc_sends_one_empty_write() {
    let mut p = Pair::new(
        &[(64, 0x06), (128, 0x08)],
        &[],
        ClientConfig::new(fc(1)),
        server_config(),
    );
    p.mrsp();
    let p0 = p.cnic.mem(0).to_vec();
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [
            write(0, 64, Some(imm1())),
            RECV,
            done(ReturnCode::SUCCESS, 128, 1)
        ]
    );
    assert_eq!(server, [kernel(1, [0; 3], 1), write(1, 128, Some(0)), RECV]);
    for rpc in 2..4 {
        let (client, server) = p.rpc();
        assert_eq!(
            client,
            [
                write(0, 0, Some(imm1())),
                RECV,
                done(ReturnCode::SUCCESS, 128, rpc)
            ]
        );
        assert_eq!(
            server,
            [kernel(1, [0; 3], rpc), write(1, 128, Some(0)), RECV]
        );
        assert_eq!(p.snic.mem(0), plus(&p0, rpc as u8), "kept, not overwritten");
        assert_eq!(p.cnic.mem(1), vec![rpc as u8; 128]);
    }
}

#[test]
fn no_output_region_reply_is_one_empty_write() {
    let mut p = Pair::new(
        &[(64, 0x04)],
        &[32],
        ClientConfig::new(fc(1)),
        server_config(),
    );
    p.mrsp();
    let p0 = p.cnic.mem(0).to_vec();
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [
            write(0, 64, Some(imm1())),
            RECV,
            done(ReturnCode::SUCCESS, 0, 1)
        ]
    );
    assert_eq!(server, [kernel(1, [0; 3], 1), write(0, 0, Some(0)), RECV]);
    assert_eq!(p.cnic.mem(0), p0);
    assert_eq!(p.snic.mem(0), plus(&p0, 1));
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Finished, Phase::DataReceiving)
    );
    let (client, _) = p.rpc();
    assert_eq!(client[2], done(ReturnCode::SUCCESS, 0, 2));
}

#[test]
fn client_without_inputs() {
    let mut p = Pair::new(
        &[(256, 0x08), (16, 0x00)],
        &[],
        ClientConfig::new(fc(2)),
        server_config(),
    );
    p.mrsp();
    let imm = encode_request(fc(2), [0; 3]);
    for rpc in 1..3 {
        let (client, server) = p.rpc();
        assert_eq!(
            client,
            [
                write(0, 0, Some(imm)),
                RECV,
                done(ReturnCode::SUCCESS, 256, rpc)
            ]
        );
        assert_eq!(
            server,
            [kernel(2, [0; 3], rpc), write(0, 256, Some(0)), RECV]
        );
        assert_eq!(p.cnic.mem(0), vec![2 * rpc as u8; 256]);
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Reordering

#[test]
fn reply_before_own_write_completions_d20() {
    let mut p = vector_b(1);
    p.mrsp();
    let p1 = p.cnic.mem(1).to_vec();
    p.cnic.hold_completions = true;
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [write(0, 64, None), write(1, 1000, Some(imm1())), RECV]
    );
    assert_eq!(
        server,
        [
            kernel(1, [0; 3], 1),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV
        ]
    );
    assert_eq!(
        p.client.phase(),
        Phase::DataSending,
        "the reply is in, the writes are not"
    );
    p.release(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Client), [done(ReturnCode::SUCCESS, 256, 1)]);
    assert_eq!(p.client.phase(), Phase::Finished);
    assert_eq!(p.cnic.mem(1), plus(&p1, 1));

    // And again, with only the in-place input left to write.
    p.cnic.hold_completions = true;
    let (client, _) = p.rpc();
    assert_eq!(client, [write(1, 1000, Some(imm1())), RECV]);
    assert_eq!(p.client.phase(), Phase::DataSending);
    p.release(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Client), [done(ReturnCode::SUCCESS, 256, 2)]);
    assert_eq!(p.cnic.mem(1), plus(&p1, 2));
}

#[test]
fn advertisement_before_own_send_completion() {
    let mut p = vector_b(1);
    p.connect();
    p.cnic.hold_completions = true;
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    assert_eq!(p.take(Side::Client), [RECV_MSG, Act::Send(100)]);
    assert_eq!(p.client.phase(), Phase::MrspSending);
    p.release(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Client), [RECV, Act::MrspComplete]);
    assert_eq!(p.client.phase(), Phase::MrspDone);
    let (client, _) = p.rpc();
    assert_eq!(client[3], done(ReturnCode::SUCCESS, 256, 1));
}

#[test]
fn next_request_before_the_servers_write_completions() {
    let mut p = vector_b(1);
    p.mrsp();
    p.snic.hold_completions = true;
    let (client, server) = p.rpc();
    assert_eq!(client[3], done(ReturnCode::SUCCESS, 256, 1));
    assert_eq!(
        server,
        [
            kernel(1, [0; 3], 1),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV
        ]
    );
    assert_eq!(p.server.phase(), Phase::DataSending);
    // The client goes on at once; the NAA has a receive for it (§3.9) and queues the call.
    let (client, server) = p.rpc();
    assert_eq!(client, [write(1, 1000, Some(imm1())), RECV]);
    assert_eq!(server, []);
    assert_eq!(p.snic.recvs.len(), 1);
    assert_eq!(p.server.phase(), Phase::DataSending);
    p.release(Side::Server);
    p.run();
    assert_eq!(
        p.take(Side::Server),
        [
            kernel(1, [0; 3], 2),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV
        ]
    );
    assert_eq!(p.take(Side::Client), [done(ReturnCode::SUCCESS, 256, 2)]);
    assert_eq!(p.cnic.mem(2), [2; 256]);
    assert!(matches!(p.server_min_recvs, Some(n) if n >= 1));
}

#[test]
fn first_request_before_the_advertisement_send_completion() {
    let mut p = vector_b(1);
    p.connect();
    p.take(Side::Server);
    p.snic.hold_completions = true;
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    assert_eq!(
        p.take(Side::Client),
        [RECV_MSG, Act::Send(100), RECV, Act::MrspComplete]
    );
    assert_eq!(p.server.phase(), Phase::MrspSending);
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [write(0, 64, None), write(1, 1000, Some(imm1())), RECV]
    );
    let mut expected = ALLOC_B.to_vec();
    expected.extend([RECV, RECV, Act::Send(52)]);
    assert_eq!(server, expected);
    p.release(Side::Server);
    p.run();
    assert_eq!(
        p.take(Side::Server),
        [
            Act::MrspComplete,
            kernel(1, [0; 3], 1),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV
        ]
    );
    assert_eq!(p.take(Side::Client), [done(ReturnCode::SUCCESS, 256, 1)]);
}

#[test]
fn established_after_the_request_is_tolerated() {
    // The passive side may see the first receive complete before its ESTABLISHED event.
    let mut p = vector_b(1);
    p.run();
    p.client.handle_input(p.now, Input::AddressResolved);
    p.client.handle_input(p.now, Input::Established);
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    assert_eq!(
        p.take(Side::Client),
        [RECV_MSG, Act::Send(100), RECV, Act::MrspComplete]
    );
    assert_eq!(p.server.phase(), Phase::MrspDone);
    p.server.handle_input(p.now, Input::Established);
    p.run();
    let mut expected = vec![RECV_MSG];
    expected.extend(ALLOC_B);
    expected.extend([RECV, RECV, Act::Send(52), Act::MrspComplete]);
    assert_eq!(p.take(Side::Server), expected);
    assert_eq!(p.server.phase(), Phase::MrspDone);
    let (client, _) = p.rpc();
    assert_eq!(client[3], done(ReturnCode::SUCCESS, 256, 1));
    // A second ESTABLISHED is a protocol violation.
    p.server.handle_input(p.now, Input::Established);
    p.run();
    let unexpected = Error::Unexpected {
        phase: Phase::DataReceiving,
    };
    assert_eq!(
        p.take(Side::Server),
        [Act::Failed(unexpected), Act::Disconnect]
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Timeouts, disconnects, failed work

#[test]
fn client_mrsp_timeout() {
    let mut scfg = server_config();
    scfg.completion_timeout = Duration::from_secs(30);
    let mut p = vector_b_with(1, scfg);
    p.connect();
    p.snic.hold_wire = true; // The Advertisement never arrives.
    p.advance_to(secs(1));
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    assert_eq!(p.take(Side::Client), [RECV_MSG, Act::Send(100)]);
    assert_eq!(p.client.phase(), Phase::MrspReceiving);
    assert_eq!(p.client.poll_timeout(), Some(secs(11)));
    p.advance_to(secs(11) - Duration::from_micros(1));
    assert_eq!(p.take(Side::Client), []);
    p.advance_to(secs(11));
    assert_eq!(
        p.take(Side::Client),
        [Act::Failed(Error::Timeout {
            phase: Phase::MrspReceiving
        })]
    );
    assert_eq!(
        (p.client.phase(), p.client.poll_timeout()),
        (Phase::Error, None)
    );
    // The server's own SEND never completes either.
    assert_eq!(p.server.poll_timeout(), Some(secs(31)));
    p.take(Side::Server);
    p.advance_to(secs(31));
    assert_eq!(
        p.take(Side::Server),
        [
            Act::Failed(Error::Timeout {
                phase: Phase::MrspSending
            }),
            Act::Disconnect
        ]
    );
}

#[test]
fn client_rpc_timeout() {
    let mut ccfg = ClientConfig::new(fc(1));
    ccfg.rpc_timeout = Duration::from_secs(5);
    let mut p = Pair::new(&B_PARAMS, &B_INTERNAL, ccfg, server_config());
    p.kernel_mode = KernelMode::Manual;
    p.mrsp();
    p.advance_to(secs(2));
    let (client, server) = p.rpc();
    assert_eq!(
        client,
        [write(0, 64, None), write(1, 1000, Some(imm1())), RECV]
    );
    assert_eq!(server, [kernel(1, [0; 3], 1)]);
    assert_eq!(p.client.poll_timeout(), Some(secs(7)));
    p.advance_to(secs(7) - Duration::from_micros(1));
    assert_eq!(p.take(Side::Client), []);
    p.advance_to(secs(7));
    assert_eq!(
        p.take(Side::Client),
        [Act::Failed(Error::Timeout {
            phase: Phase::DataReceiving
        })]
    );
    assert_eq!(p.client.phase(), Phase::Error);
    assert_eq!(p.take(Side::Server), []);

    // A per-call deadline overrides the configured one.
    let mut p = vector_b(1);
    p.kernel_mode = KernelMode::Manual;
    p.mrsp();
    p.client
        .start_rpc(
            p.now,
            RpcArgs {
                timeout: Duration::from_millis(1500),
                ..p.args()
            },
        )
        .unwrap();
    p.run();
    assert_eq!(p.client.poll_timeout(), Some(Instant::from_millis(1500)));
    p.take(Side::Client);
    p.advance_to(Instant::from_millis(1500));
    assert_eq!(
        p.take(Side::Client),
        [Act::Failed(Error::Timeout {
            phase: Phase::DataReceiving
        })]
    );
}

#[test]
fn server_mrsp_timeout() {
    let mut p = vector_b(1);
    p.connect();
    p.take(Side::Server);
    assert_eq!(p.server.poll_timeout(), Some(secs(10)));
    p.advance_to(secs(10) - Duration::from_micros(1));
    assert_eq!(p.take(Side::Server), []);
    p.advance_to(secs(10));
    assert_eq!(
        p.take(Side::Server),
        [
            Act::Failed(Error::Timeout {
                phase: Phase::MrspReceiving
            }),
            Act::Disconnect
        ]
    );
    assert_eq!(p.server.phase(), Phase::Error);
    // The client was idle: it just sees the disconnect.
    assert_eq!(p.take(Side::Client), []);
    assert_eq!(p.client.phase(), Phase::Disconnected);
    assert_eq!(
        p.client.start_mrsp(p.now),
        Err(Error::WrongPhase {
            phase: Phase::Disconnected
        })
    );
}

#[test]
fn server_idle_timeout() {
    let mut scfg = server_config();
    scfg.idle_timeout = Some(Duration::from_secs(30));
    let mut p = vector_b_with(1, scfg);
    p.mrsp();
    assert_eq!(p.server.poll_timeout(), Some(secs(30)));
    p.advance_to(secs(20));
    let (client, _) = p.rpc();
    assert_eq!(client[3], done(ReturnCode::SUCCESS, 256, 1));
    assert_eq!(p.server.poll_timeout(), Some(secs(50)));
    p.advance_to(secs(50) - Duration::from_micros(1));
    assert_eq!(p.take(Side::Server), []);
    p.advance_to(secs(50));
    assert_eq!(
        p.take(Side::Server),
        [
            Act::Failed(Error::Timeout {
                phase: Phase::DataReceiving
            }),
            Act::Disconnect
        ]
    );
    assert_eq!(p.take(Side::Client), []);
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Disconnected, Phase::Error)
    );
}

#[test]
fn server_completion_timeout() {
    let mut p = vector_b(1);
    p.mrsp();
    p.advance_to(secs(3));
    p.snic.hold_completions = true; // The NAA never sees its write-back complete.
    let (client, server) = p.rpc();
    assert_eq!(client[3], done(ReturnCode::SUCCESS, 256, 1));
    assert_eq!(server.len(), 4);
    assert_eq!(p.server.poll_timeout(), Some(secs(13)));
    p.advance_to(secs(13));
    assert_eq!(
        p.take(Side::Server),
        [
            Act::Failed(Error::Timeout {
                phase: Phase::DataSending
            }),
            Act::Disconnect
        ]
    );
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Disconnected, Phase::Error)
    );
}

#[test]
fn server_disconnects_mid_rpc() {
    let mut p = vector_b(1);
    p.kernel_mode = KernelMode::Manual;
    p.mrsp();
    let (_, server) = p.rpc();
    assert_eq!(server, [kernel(1, [0; 3], 1)]);
    assert_eq!(p.client.phase(), Phase::DataReceiving);
    p.hang_up(Side::Server);
    p.run();
    assert_eq!(
        p.take(Side::Client),
        [Act::Failed(Error::PeerDisconnected {
            phase: Phase::DataReceiving
        })]
    );
    assert_eq!(
        (p.client.phase(), p.client.poll_timeout()),
        (Phase::Error, None)
    );
}

#[test]
fn client_disconnects_mid_rpc() {
    // While the kernel runs: the late kernel_finished must not write anything back.
    let mut p = vector_b(1);
    p.kernel_mode = KernelMode::Manual;
    p.mrsp();
    p.rpc();
    assert_eq!(p.server.phase(), Phase::Calculating);
    p.hang_up(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Server), [Act::Disconnect]);
    assert_eq!(
        (p.server.phase(), p.server.poll_timeout()),
        (Phase::Finished, None)
    );
    assert_eq!(p.finish_kernel(ReturnCode::SUCCESS), Ok(()));
    p.run();
    assert_eq!(p.take(Side::Server), []);
    assert_eq!(p.server.phase(), Phase::Finished);
    assert!(!p.server.kernel_running());

    // While the write-back is in flight.
    let mut p = vector_b(1);
    p.mrsp();
    p.snic.hold_wire = true;
    let (_, server) = p.rpc();
    assert_eq!(server.len(), 4);
    assert_eq!(p.server.phase(), Phase::DataSending);
    p.hang_up(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Server), [Act::Disconnect]);
    assert_eq!(p.server.phase(), Phase::Finished);
    // Its flushed writes are ignored.
    p.snic.hold_wire = false;
    p.run();
    assert_eq!(p.take(Side::Server), []);
    assert_eq!(p.server.phase(), Phase::Finished);
}

#[test]
fn client_disconnects_during_the_mrsp_d31() {
    // Before the request.
    let mut p = vector_b(1);
    p.connect();
    p.take(Side::Server);
    p.hang_up(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Server), [Act::Disconnect]);
    assert_eq!(
        (p.server.phase(), p.server.poll_timeout()),
        (Phase::Finished, None)
    );

    // While the NAA allocates: late answers are refused and change nothing.
    let mut p = vector_b(1);
    p.alloc_mode = AllocMode::Manual;
    p.connect();
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    p.take(Side::Server);
    p.assign_next().unwrap();
    p.hang_up(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Server), [Act::Disconnect]);
    let finished = Err(Error::WrongPhase {
        phase: Phase::Finished,
    });
    assert_eq!(p.assign_next(), finished);
    assert_eq!(
        p.server.assignment_failed(p.now, RegionId::new(2)),
        finished
    );
    p.run();
    assert_eq!(p.take(Side::Server), []);
    assert_eq!(p.server.phase(), Phase::Finished);

    // With the Advertisement in flight.
    let mut p = vector_b(1);
    p.snic.hold_wire = true;
    p.connect();
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    p.take(Side::Server);
    assert_eq!(p.server.phase(), Phase::MrspSending);
    p.hang_up(Side::Client);
    p.snic.hold_wire = false;
    p.run();
    assert_eq!(p.take(Side::Server), [Act::Disconnect]);
    assert_eq!(p.server.phase(), Phase::Finished);
}

#[test]
fn remote_access_error_on_the_client_write() {
    let mut p = vector_b(1);
    p.snic.hold_wire = true;
    p.connect();
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    // Corrupt the rkey of Advertisement record 1 in flight.
    p.snic.send_in_flight()[4 + 16 + 8..4 + 16 + 12].copy_from_slice(&0xDEAD_BEEFu32.to_be_bytes());
    p.snic.hold_wire = false;
    p.run();
    p.take(Side::Client);
    p.take(Side::Server);
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
    let client = p.take_actions(Side::Client);
    let Action::Write(w) = client[1] else {
        panic!("{client:?}")
    };
    assert_eq!(w.rkey, 0xDEAD_BEEF);
    let failed = Error::WorkFailed {
        wr_id: w.wr_id,
        error: WorkError::RemoteAccess,
    };
    let compact: Vec<_> = client.into_iter().map(Act::from).collect();
    assert_eq!(
        compact,
        [
            write(0, 64, None),
            write(1, 1000, Some(imm1())),
            RECV,
            Act::Failed(failed)
        ]
    );
    assert_eq!(p.client.phase(), Phase::Error);
    assert_eq!(
        p.take(Side::Server),
        [],
        "nothing reached the NAA's receive queue"
    );
    // The client's host tears down; the NAA follows.
    p.hang_up(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Server), [Act::Disconnect]);
    assert_eq!(p.server.phase(), Phase::Finished);
}

#[test]
fn remote_access_error_on_the_server_write_back() {
    let mut p = vector_b(1);
    p.cnic.hold_wire = true;
    p.connect();
    p.client.start_mrsp(p.now).unwrap();
    p.run();
    // Corrupt the rkey the client publishes for p2 (record 2) in flight.
    p.cnic.send_in_flight()[4 + 48 + 16..4 + 48 + 20]
        .copy_from_slice(&0xBAD0_0000u32.to_be_bytes());
    p.cnic.hold_wire = false;
    p.run();
    p.take(Side::Client);
    p.take(Side::Server);
    let p1 = p.cnic.mem(1).to_vec();
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
    let server = p.take_actions(Side::Server);
    let Action::Write(w) = server[2] else {
        panic!("{server:?}")
    };
    let failed = Error::WorkFailed {
        wr_id: w.wr_id,
        error: WorkError::RemoteAccess,
    };
    let compact: Vec<_> = server.into_iter().map(Act::from).collect();
    assert_eq!(
        compact,
        [
            kernel(1, [0; 3], 1),
            write(1, 1000, None),
            write(2, 256, Some(0)),
            RECV,
            Act::Failed(failed),
            Act::Disconnect
        ]
    );
    assert_eq!(
        p.take(Side::Client),
        [
            write(0, 64, None),
            write(1, 1000, Some(imm1())),
            RECV,
            Act::Failed(Error::PeerDisconnected {
                phase: Phase::DataReceiving
            })
        ]
    );
    // The first output had landed; the failed one did not.
    assert_eq!(p.cnic.mem(1), plus(&p1, 1));
    assert_ne!(p.cnic.mem(2), [1; 256]);
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Error, Phase::Error)
    );
}

#[test]
fn failed_data_receive_sends_the_error_write_d07() {
    let mut p = vector_b(1);
    p.mrsp();
    // The receive posted ahead for RPC 2 (after RPC 1's writes) fails: it is only
    // forgotten, and RPC 1 ends as usual.
    p.cnic.fail_data_recv = true;
    let (client, _) = p.rpc();
    assert_eq!(
        client,
        [
            write(0, 64, None),
            write(1, 1000, Some(imm1())),
            RECV,
            done(ReturnCode::SUCCESS, 256, 1)
        ]
    );
    assert!(
        !p.cnic.fail_data_recv,
        "the receive posted ahead was refused"
    );
    assert_eq!(p.cnic.recvs.len(), 0);
    let before: Vec<_> = (0..3).map(|i| p.cnic.mem(i).to_vec()).collect();
    let server_r1 = p.snic.mem(1).to_vec();

    // RPC 2 posts its reply's receive itself, before its writes; that fails too.
    p.cnic.fail_data_recv = true;
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
    let client = p.take_actions(Side::Client);
    let Action::PostRecv { wr_id, .. } = client[0] else {
        panic!("{client:?}")
    };
    let Action::Write(w) = client[1] else {
        panic!("{client:?}")
    };
    // Spec §3.5: zero length, immediate 0, to region 0's remote address and rkey, with SE.
    assert_eq!(
        (w.remote_addr, w.rkey, w.solicited),
        (SERVER_VA, SERVER_RKEY, true)
    );
    let compact: Vec<_> = client.into_iter().map(Act::from).collect();
    assert_eq!(
        compact,
        [
            RECV,
            write(0, 0, Some(0)),
            Act::Failed(Error::PostFailed(wr_id))
        ]
    );
    assert_eq!(p.client.phase(), Phase::Error);
    // The NAA must not run the previous kernel on stale data (D-07).
    assert_eq!(
        p.take(Side::Server),
        [Act::Failed(Error::ClientSignalledError), Act::Disconnect]
    );
    assert_eq!(p.server.phase(), Phase::Error);
    assert_eq!(p.server.rpc_count(), 1);
    let after: Vec<_> = (0..3).map(|i| p.cnic.mem(i).to_vec()).collect();
    assert_eq!(before, after);
    assert_eq!(p.snic.mem(1), server_r1);
}

#[test]
fn error_write_queued_behind_the_write_back_d07() {
    // The client's error write reaches the NAA while its write-back is still completing: the
    // queued "call" must still end the connection, not run the kernel.
    let mut p = vector_b(1);
    p.mrsp();
    p.snic.hold_completions = true;
    // The receive posted ahead for RPC 2 fails (forgotten), then RPC 2's own.
    p.cnic.fail_data_recv = true;
    let (client, _) = p.rpc();
    assert_eq!(client[3], done(ReturnCode::SUCCESS, 256, 1));
    p.cnic.fail_data_recv = true;
    let (client, server) = p.rpc();
    assert_eq!(client[1], write(0, 0, Some(0)));
    assert_eq!(server, []);
    p.release(Side::Server);
    p.run();
    assert_eq!(
        p.take(Side::Server),
        [Act::Failed(Error::ClientSignalledError), Act::Disconnect]
    );
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Error, Phase::Error)
    );
}

// ---------------------------------------------------------------------------------------------
// 7. Commands in the wrong phase

#[test]
fn commands_in_the_wrong_phase_change_nothing() {
    let mut p = vector_b(1);
    p.run();
    p.take(Side::Server);
    assert_eq!(
        p.client.start_mrsp(p.now),
        Err(Error::WrongPhase { phase: Phase::Init })
    );
    p.connect();
    // start_rpc before the MRSP.
    assert_eq!(
        p.client.start_rpc(p.now, p.args()),
        Err(Error::WrongPhase {
            phase: Phase::Connected
        })
    );
    // kernel_finished without a kernel.
    assert_eq!(
        p.server.kernel_finished(p.now, ReturnCode::SUCCESS),
        Err(Error::WrongPhase {
            phase: Phase::MrspReceiving
        })
    );
    p.run();
    assert_eq!(
        (p.take(Side::Client), p.take(Side::Server)),
        (vec![], vec![])
    );
    assert_eq!(
        (
            p.client.phase(),
            p.client.rpc_count(),
            p.client.poll_timeout()
        ),
        (Phase::Connected, 0, None)
    );

    // start_mrsp twice: the second call changes nothing.
    p.alloc_mode = AllocMode::Manual;
    p.client.start_mrsp(p.now).unwrap();
    let deadline = p.client.poll_timeout();
    assert_eq!(
        p.client.start_mrsp(p.now),
        Err(Error::WrongPhase {
            phase: Phase::MrspSending
        })
    );
    assert_eq!(p.client.poll_timeout(), deadline);
    assert!(p.client.regions_mut().is_err());
    p.run();
    assert_eq!(p.take(Side::Client), [RECV_MSG, Act::Send(100)]);
    assert_eq!(p.take(Side::Server), ALLOC_B);

    // region_assigned twice, and for a region not handed out.
    assert_eq!(p.allocs.len(), 4);
    p.assign_next().unwrap();
    let first = naaice_core::testkit::pair::AllocRequest {
        region: RegionId::new(0),
        size: 64,
        requested_addr: 0x1000_2000,
        internal: false,
    };
    assert_eq!(
        p.assign(first),
        Err(Error::WrongPhase {
            phase: Phase::MrspReceiving
        })
    );
    assert_eq!(
        p.server.region_assigned(p.now, RegionId::new(4), 0x1000, 1),
        Err(Error::Region(
            naaice_core::region::RegionError::UnknownRegion(4)
        ))
    );
    p.run();
    assert_eq!(p.take(Side::Server), []);
    assert_eq!(p.server.phase(), Phase::MrspReceiving);
    while !p.allocs.is_empty() {
        p.assign_next().unwrap();
    }
    p.run();
    assert_eq!(
        p.take(Side::Server),
        [RECV, RECV, Act::Send(52), Act::MrspComplete]
    );
    assert_eq!(p.take(Side::Client), [RECV, Act::MrspComplete]);
    assert_eq!(
        p.snic.sent,
        [B_ADV.to_vec()],
        "region 0 kept its first assignment"
    );
    assert_eq!(
        p.assign(first),
        Err(Error::WrongPhase {
            phase: Phase::MrspDone
        })
    );
    assert_eq!(
        p.server.assignment_failed(p.now, RegionId::new(0)),
        Err(Error::WrongPhase {
            phase: Phase::MrspDone
        })
    );

    // kernel_finished without a kernel after the MRSP; commands during an RPC.
    assert_eq!(
        p.server.kernel_finished(p.now, ReturnCode::SUCCESS),
        Err(Error::WrongPhase {
            phase: Phase::MrspDone
        })
    );
    p.kernel_mode = KernelMode::Manual;
    p.client.start_rpc(p.now, p.args()).unwrap();
    let busy = Error::WrongPhase {
        phase: Phase::DataSending,
    };
    assert_eq!(p.client.start_rpc(p.now, p.args()), Err(busy));
    assert_eq!(
        p.client.set_bytes_to_send(RegionId::new(1), Some(10)),
        Err(busy)
    );
    p.run();
    assert_eq!(
        p.take(Side::Client),
        [write(0, 64, None), write(1, 1000, Some(imm1())), RECV]
    );
    assert_eq!(p.take(Side::Server), [kernel(1, [0; 3], 1)]);
    p.finish_kernel(ReturnCode::SUCCESS).unwrap();
    assert_eq!(
        p.server.kernel_finished(p.now, ReturnCode::SUCCESS),
        Err(Error::WrongPhase {
            phase: Phase::DataSending
        })
    );
    p.run();
    assert_eq!(p.take(Side::Client), [done(ReturnCode::SUCCESS, 256, 1)]);
    assert_eq!(
        p.client.start_mrsp(p.now),
        Err(Error::WrongPhase {
            phase: Phase::Finished
        })
    );
    assert_eq!(
        (p.client.phase(), p.server.phase()),
        (Phase::Finished, Phase::DataReceiving)
    );
}

// ---------------------------------------------------------------------------------------------
// 8. What the machines keep for their hosts: busy, MRSP done, last result, terminal error,
//    orphaned kernels.

#[test]
fn machines_keep_progress_result_and_terminal_error() {
    let mut p = vector_b(1);
    p.kernel_mode = KernelMode::Manual;
    assert!(!p.client.is_busy() && !p.client.mrsp_done());
    p.connect();
    p.client.start_mrsp(p.now).unwrap();
    assert!(p.client.is_busy() && !p.client.mrsp_done());
    p.run();
    assert!(!p.client.is_busy() && p.client.mrsp_done() && p.server.mrsp_done());
    assert_eq!((p.client.last_result(), p.client.error()), (None, None));

    // An RPC: busy until the reply, then the result is kept until taken.
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
    assert!(p.client.is_busy() && p.server.kernel_running());
    p.finish_kernel(ReturnCode::SUCCESS).unwrap();
    p.run();
    let result = p.client.last_result().expect("the RPC finished");
    assert_eq!(
        (result.status, result.bytes_received, result.rpc),
        (ReturnCode::SUCCESS, 256, 1)
    );
    assert!(!p.client.is_busy() && !p.server.kernel_running());
    assert_eq!(p.client.last_result(), Some(result));

    // A kernel timeout orphans the kernel: still running, RPC answered; the late result is
    // only noted.
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
    p.advance(Duration::from_secs(10));
    assert_eq!(
        p.client.last_result().map(|r| r.status),
        Some(ReturnCode::KERNEL_TIMEOUT)
    );
    assert!(p.server.kernel_running() && p.server.error().is_none());
    p.finish_kernel(ReturnCode::SUCCESS).unwrap();
    assert!(!p.server.kernel_running());

    // The connection breaks mid-RPC: the client keeps the terminal error, the server ends.
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
    p.hang_up(Side::Client);
    p.client.handle_input(p.now, Input::Disconnected);
    p.run();
    assert_eq!(
        (p.server.phase(), p.server.error()),
        (Phase::Finished, None)
    );
    let error = Error::PeerDisconnected {
        phase: Phase::DataReceiving,
    };
    assert_eq!(
        (p.client.phase(), p.client.error()),
        (Phase::Error, Some(error))
    );
    assert!(!p.client.is_busy() && !p.client.mrsp_done());
    // A kernel still running when the connection ends is orphaned, not lost.
    assert!(p.server.kernel_running());
    p.finish_kernel(ReturnCode::SUCCESS).unwrap();
    assert!(!p.server.kernel_running());
}

#[test]
fn phase_values_round_trip() {
    for v in 0..=u8::MAX {
        if let Some(phase) = Phase::from_value(v) {
            assert_eq!(phase.value(), v);
        }
    }
    let known = (0..=u8::MAX).filter_map(Phase::from_value).count();
    assert_eq!(known, 12);
    assert_eq!(Phase::from_value(12), Some(Phase::MrspDone));
    assert_eq!(Phase::from_value(4), None);
}

/// The receive the client posted ahead for its next RPC, from its actions of the last RPC.
fn spare_of(actions: &[Action]) -> naaice_core::machine::WrId {
    let Some(&Action::PostRecv {
        wr_id,
        buffer: RecvBuffer::Empty,
    }) = actions
        .iter()
        .rev()
        .find(|a| matches!(a, Action::PostRecv { .. }))
    else {
        panic!("no receive posted ahead: {actions:?}")
    };
    wr_id
}

#[test]
fn a_flushed_receive_posted_ahead_leaves_the_disconnect_to_say_so() {
    // Either order of the flush and the disconnect event: between RPCs the client just sees
    // the disconnect, as when it had no receive posted.
    for flush_first in [false, true] {
        let mut p = vector_b(1);
        p.mrsp();
        p.client.start_rpc(p.now, p.args()).unwrap();
        p.run();
        let spare = spare_of(&p.take_actions(Side::Client));
        assert!(!p.client.is_busy());
        let flush = Input::WorkFailed {
            wr_id: spare,
            error: WorkError::Flushed,
        };
        if flush_first {
            p.client.handle_input(p.now, flush);
        }
        p.client.handle_input(p.now, Input::Disconnected);
        if !flush_first {
            p.client.handle_input(p.now, flush);
        }
        p.run();
        assert_eq!(p.take(Side::Client), []);
        assert_eq!(
            (p.client.phase(), p.client.error()),
            (Phase::Disconnected, None)
        );
    }
}

#[test]
fn a_receive_posted_ahead_that_fails_otherwise_fails_the_connection() {
    let mut p = vector_b(1);
    p.mrsp();
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
    let spare = spare_of(&p.take_actions(Side::Client));
    // A SEND into the data receive (no buffer) between RPCs: a peer's error, not a flush.
    let input = Input::WorkFailed {
        wr_id: spare,
        error: WorkError::LocalLength,
    };
    p.client.handle_input(p.now, input);
    p.run();
    let failed = Error::WorkFailed {
        wr_id: spare,
        error: WorkError::LocalLength,
    };
    assert_eq!(p.take(Side::Client), [Act::Failed(failed)]);
    assert_eq!(p.client.phase(), Phase::Error);
}

#[test]
fn a_stray_reply_between_rpcs_meets_the_receive_posted_ahead_and_fails() {
    let mut p = vector_b(1);
    p.mrsp();
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
    let spare = spare_of(&p.take_actions(Side::Client));
    // The NAA writes WITH IMM with no RPC in flight: the receive posted ahead takes it.
    let stray = Input::WriteImmReceived {
        wr_id: spare,
        imm: 0,
        len: 0,
    };
    p.client.handle_input(p.now, stray);
    p.run();
    assert_eq!(
        p.take(Side::Client),
        [Act::Failed(Error::Unexpected {
            phase: Phase::Finished
        })]
    );
    assert_eq!(p.client.phase(), Phase::Error);
}

#[test]
fn reloaded_kernels_apply_from_the_next_call() {
    let mut p = vector_b(5);
    p.mrsp();
    let imm = encode_request(fc(5), [0; 3]);
    let (client, _) = p.rpc();
    assert_eq!(client.last(), Some(&done(ReturnCode::SOCKET_UNAVAIL, 0, 1)));
    // Code 5 gains a kernel (and a longer timeout): the next call runs it.
    p.server
        .set_kernels(KernelSet::empty().with(fc(5)), Duration::from_secs(30));
    assert_eq!(p.server.config().kernel_timeout, Duration::from_secs(30));
    let (client, server) = p.rpc();
    assert_eq!(server.first(), Some(&kernel(5, [0; 3], 2)));
    assert_eq!(
        client,
        [
            write(1, 1000, Some(imm)),
            RECV,
            done(ReturnCode::SUCCESS, 256, 2)
        ]
    );
    // And loses it again: SOCKET_UNAVAIL, the connection stays usable.
    p.server
        .set_kernels(KernelSet::empty(), Duration::from_secs(10));
    let (client, _) = p.rpc();
    assert_eq!(client.last(), Some(&done(ReturnCode::SOCKET_UNAVAIL, 0, 3)));
    assert_eq!(p.server.phase(), Phase::DataReceiving);
}
