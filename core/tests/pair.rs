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
use naaice_core::machine::{
    Error, KernelSet, Machine, Placement, RecvBuffer, RpcArgs, WorkError, WrId,
};
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
/// The server's Advertisement once vector B's memory is assigned: the first RPC's receive and
/// a spare (spec §3.9), then the SEND.
const ADVERTISE_B: [Act; 3] = [RECV, RECV, Act::Send(52)];
/// The client's whole MRSP: its receive for the Advertisement, the AAR, the first RPC's reply
/// receive (posted ahead) and the end of the MRSP.
const CLIENT_MRSP: [Act; 4] = [RECV_MSG, Act::Send(100), RECV, Act::MrspComplete];
/// The client's error when the NAA goes away while it waits for a reply.
const PEER_GONE_MID_RPC: Error = Error::PeerDisconnected {
    phase: Phase::DataReceiving,
};

const fn fc(code: u8) -> FunctionCode {
    match FunctionCode::new(code) {
        Some(c) => c,
        None => panic!("invalid function code"),
    }
}

const fn write(region: u8, len: u32, imm: Option<u32>) -> Act {
    Act::Write { region, len, imm }
}

fn done(status: ReturnCode, bytes: u32, rpc: u32) -> Act {
    Act::RpcComplete { status, bytes, rpc }
}

/// RPC `rpc` completed successfully with `bytes` bytes of output.
fn succeeded(bytes: u32, rpc: u32) -> Act {
    done(ReturnCode::SUCCESS, bytes, rpc)
}

fn kernel(fncode: u8, user: [u8; 3], rpc: u32) -> Act {
    Act::Kernel { fncode, user, rpc }
}

fn timed_out(phase: Phase) -> Act {
    Act::Failed(Error::Timeout { phase })
}

fn malformed(e: wire::Error) -> Error {
    Error::Malformed(e)
}

fn wrong_phase<T>(phase: Phase) -> Result<T, Error> {
    Err(Error::WrongPhase { phase })
}

fn secs(s: u64) -> Instant {
    Instant::from_millis(s * 1000)
}

fn server_config() -> ServerConfig {
    ServerConfig::new(KernelSet::empty().with(fc(1)).with(fc(2)).with(fc(3)))
}

/// [`server_config`] changed by `change`.
fn config(change: impl FnOnce(&mut ServerConfig)) -> ServerConfig {
    let mut scfg = server_config();
    change(&mut scfg);
    scfg
}

/// The NAA places regions at their requested addresses inside `base..base + len`.
fn window(base: u64, len: u64) -> Placement {
    Placement::Requested { base, len }
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

/// [`vector_b`] with function code 1, after the MRSP.
fn vector_b_after_mrsp() -> Pair {
    let mut p = vector_b(1);
    p.mrsp();
    p
}

/// [`vector_b_after_mrsp`] where the test finishes the kernels ([`KernelMode::Manual`]).
fn vector_b_manual_kernels() -> Pair {
    let mut p = vector_b(1);
    p.kernel_mode = KernelMode::Manual;
    p.mrsp();
    p
}

/// A client with parameter regions `params` and internal regions `internal` calling function
/// code `code`, after the MRSP.
fn pair_after_mrsp(params: &[(u32, u8)], internal: &[u32], code: u8) -> Pair {
    let mut p = Pair::new(
        params,
        internal,
        ClientConfig::new(fc(code)),
        server_config(),
    );
    p.mrsp();
    p
}

/// `bytes` with `add` added to every byte.
fn plus(bytes: &[u8], add: u8) -> Vec<u8> {
    bytes.iter().map(|b| b.wrapping_add(add)).collect()
}

/// The imm the client puts on its final write with function code 1 and no user bytes.
fn imm1() -> u32 {
    encode_request(fc(1), [0; 3])
}

/// Copies of the client's three parameter buffers.
fn client_buffers(p: &Pair) -> Vec<Vec<u8>> {
    (0..3).map(|i| p.cnic.mem(i).to_vec()).collect()
}

fn compact(actions: &[Action]) -> Vec<Act> {
    actions.iter().map(|&a| Act::from(a)).collect()
}

/// What the client of vector B does for RPC `rpc` with request immediate `imm` until the
/// reply: the single-send input p0 (in the first RPC only), p1 WITH IMM, and the receive for
/// the next RPC's reply.
fn b_call(rpc: u32, imm: u32) -> Vec<Act> {
    let p0 = (rpc == 1).then_some(write(0, 64, None));
    p0.into_iter()
        .chain([write(1, 1000, Some(imm)), RECV])
        .collect()
}

/// [`b_call`] answered with success and p2's 256 bytes.
fn b_rpc_ok(rpc: u32, imm: u32) -> Vec<Act> {
    let mut actions = b_call(rpc, imm);
    actions.push(succeeded(256, rpc));
    actions
}

/// Vector B's write-back: p1 (in place), p2 WITH IMM `imm` (the return code), and the receive
/// that replaces the call's.
fn b_write_back(imm: u32) -> [Act; 3] {
    [write(1, 1000, None), write(2, 256, Some(imm)), RECV]
}

/// What the NAA of vector B does for RPC `rpc`: the kernel, then the write-back with success.
fn b_served(fncode: u8, user: [u8; 3], rpc: u32) -> Vec<Act> {
    let mut actions = vec![kernel(fncode, user, rpc)];
    actions.extend(b_write_back(0));
    actions
}

/// The outputs of vector B after kernels that added `added` in all: p1 (in place) is its
/// input `p1` + `added`, p2 is all `added`.
#[track_caller]
fn assert_b_outputs(p: &Pair, p1: &[u8], added: u8) {
    assert_eq!(p.cnic.mem(1), plus(p1, added), "p1 after adding {added}");
    assert_eq!(p.cnic.mem(2), [added; 256], "p2 after adding {added}");
}

/// The client starts the MRSP and both run until nothing moves.
fn begin_mrsp(p: &mut Pair) {
    p.client.start_mrsp(p.now).unwrap();
    p.run();
}

/// Starts the MRSP with the first message `side` sends held on the wire; `edit` changes it in
/// flight before it is delivered and both run.
fn begin_mrsp_with_edit(p: &mut Pair, side: Side, edit: impl FnOnce(&mut Vec<u8>)) {
    p.nic_mut(side).hold_wire = true;
    begin_mrsp(p);
    edit(p.nic_mut(side).send_in_flight());
    p.nic_mut(side).hold_wire = false;
    p.run();
}

/// The client starts an RPC with [`Pair::args`] and both run until nothing moves.
fn begin_rpc(p: &mut Pair) {
    p.client.start_rpc(p.now, p.args()).unwrap();
    p.run();
}

/// [`Pair::rpc`] with the full actions of the client and the server.
fn rpc_actions(p: &mut Pair) -> (Vec<Action>, Vec<Action>) {
    begin_rpc(p);
    (p.take_actions(Side::Client), p.take_actions(Side::Server))
}

/// Runs one RPC ([`Pair::rpc`]) and asserts the actions of the client and the server.
#[track_caller]
fn assert_rpc(p: &mut Pair, client: &[Act], server: &[Act]) {
    let (c, s) = p.rpc();
    assert_eq!(c, client, "the client's actions");
    assert_eq!(s, server, "the server's actions");
}

#[track_caller]
fn assert_phases(p: &Pair, client: Phase, server: Phase) {
    assert_eq!((p.client.phase(), p.server.phase()), (client, server));
}

#[track_caller]
fn assert_no_deadlines(p: &Pair) {
    assert_eq!(
        (p.client.poll_timeout(), p.server.poll_timeout()),
        (None, None)
    );
}

/// Releases the completions held back for `side`, runs, and returns `side`'s actions.
fn release(p: &mut Pair, side: Side) -> Vec<Act> {
    p.release(side);
    p.run();
    p.take(side)
}

/// `side`'s deadline is `deadline`: until just before it nothing happens on the `quiet`
/// sides; then the clock reaches it.
#[track_caller]
fn advance_to_deadline(p: &mut Pair, side: Side, deadline: Instant, quiet: &[Side]) {
    let pending = match side {
        Side::Client => p.client.poll_timeout(),
        Side::Server => p.server.poll_timeout(),
    };
    assert_eq!(pending, Some(deadline), "{side:?}'s deadline");
    p.advance_to(deadline - Duration::from_micros(1));
    for &q in quiet {
        assert_eq!(p.take(q), [], "{q:?} before the deadline");
    }
    p.advance_to(deadline);
}

/// The client's host tears the connection down: the NAA sees it and finishes, with no deadline
/// left.
#[track_caller]
fn client_hangs_up(p: &mut Pair) {
    p.hang_up(Side::Client);
    p.run();
    assert_eq!(p.take(Side::Server), [Act::Disconnect]);
    assert_eq!(
        (p.server.phase(), p.server.poll_timeout()),
        (Phase::Finished, None)
    );
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
    assert_phases(&p, Phase::Connected, Phase::MrspReceiving);

    begin_mrsp(&mut p);
    assert_eq!(p.take(Side::Client), CLIENT_MRSP);
    let expected = [&ALLOC_B[..], &ADVERTISE_B, &[Act::MrspComplete]].concat();
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
    assert_phases(&p, Phase::MrspDone, Phase::MrspDone);
    assert_no_deadlines(&p);
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
    let (client, server) = rpc_actions(&mut p);
    assert_eq!(compact(&client), b_rpc_ok(1, imm));
    assert_eq!(compact(&server), b_served(1, user, 1));
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
    assert_b_outputs(&p, &p1, 1);
    assert_phases(&p, Phase::Finished, Phase::DataReceiving);
    // Between RPCs: the client's receive posted ahead for RPC 2; the server's for RPC 2 and
    // its spare.
    assert_eq!((p.cnic.recvs.len(), p.snic.recvs.len()), (1, 2));

    // RPC 2: the single-send region is no longer written, so the NAA keeps its old contents.
    p.cnic.mem_mut(0).fill(0xEE);
    assert_rpc(&mut p, &b_rpc_ok(2, imm), &b_served(1, user, 2));
    assert_eq!(p.snic.mem(0), plus(&p0, 2));
    assert_b_outputs(&p, &p1, 2);

    // RPC 3 with new user bytes.
    let user = [0xA0, 0xB0, 0xC0];
    p.user = user;
    let imm = encode_request(fc(1), user);
    assert_eq!(imm, 0xC0B0_A081);
    assert_rpc(&mut p, &b_rpc_ok(3, imm), &b_served(1, user, 3));
    assert_eq!(p.snic.mem(0), plus(&p0, 3));
    assert_eq!(p.cnic.mem(0), [0xEE; 64]);
    assert_b_outputs(&p, &p1, 3);
    assert!(
        p.snic.mem(3).iter().all(|&b| b == 0),
        "internal region untouched"
    );

    assert_phases(&p, Phase::Finished, Phase::DataReceiving);
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
    assert_no_deadlines(&p);
}

#[test]
fn bytes_to_send_partial_and_zero_length_writes() {
    let mut p = vector_b_after_mrsp();
    let p0 = p.cnic.mem(0).to_vec();
    let p1 = p.cnic.mem(1).to_vec();
    let p1_id = RegionId::new(1);
    assert!(matches!(
        p.client.set_bytes_to_send(p1_id, Some(1001)),
        Err(Error::Region(
            naaice_core::region::RegionError::BytesToSendTooLarge { .. }
        ))
    ));
    // p1 after `n` kernels with only its first 10 bytes sent: the rest was never written.
    let first_10_plus = |n: u8| [plus(&p1[..10], n), vec![n; 990]].concat();

    p.client.set_bytes_to_send(p1_id, Some(10)).unwrap();
    let client = [write(0, 64, None), write(1, 10, Some(imm1())), RECV];
    // The NAA writes the full region back (§3.6): 10 bytes of input, the rest as it was, + 1.
    assert_rpc(
        &mut p,
        &[&client[..], &[succeeded(256, 1)]].concat(),
        &b_served(1, [0; 3], 1),
    );
    assert_eq!(p.cnic.mem(1), first_10_plus(1));
    assert_eq!(p.snic.mem(0), plus(&p0, 1));

    p.client.set_bytes_to_send(p1_id, Some(0)).unwrap();
    let (client, _) = p.rpc();
    assert_eq!(client, [write(1, 0, Some(imm1())), RECV, succeeded(256, 2)]);
    assert_eq!(p.cnic.mem(1), first_10_plus(2));

    p.client.set_bytes_to_send(p1_id, None).unwrap();
    p.cnic.mem_mut(1).copy_from_slice(&p1);
    let (client, _) = p.rpc();
    assert_eq!(client, b_rpc_ok(3, imm1()));
    assert_eq!(p.cnic.mem(1), plus(&p1, 1));
}

#[test]
fn kernel_2_and_requested_placement_at_the_window_edges() {
    // The window holds exactly i0 (0x1000_0000, 8 KiB), p0, p1 and p2 (ends at 0x1000_4100).
    let scfg = config(|c| {
        c.placement = window(0x1000_0000, 0x4100);
        c.max_total_bytes = B_TOTAL;
    });
    let mut p = vector_b_with(2, scfg);
    p.mrsp();
    let addrs: Vec<_> = p.client.remote_regions().iter().map(|r| r.addr).collect();
    assert_eq!(addrs, [0x1000_2000, 0x1000_3000, 0x1000_4000]);
    let p1 = p.cnic.mem(1).to_vec();
    let imm = encode_request(fc(2), [0; 3]);
    assert_rpc(&mut p, &b_rpc_ok(1, imm), &b_served(2, [0; 3], 1));
    assert_b_outputs(&p, &p1, 2);
}

// ---------------------------------------------------------------------------------------------
// 2. MRSP error paths

/// Runs the MRSP against a server that refuses it in `case`. The error SEND must complete
/// before the server fails and disconnects (D-17); `server_before` is what the server does
/// before its SEND. The client gets only the `code`; the server reports `cause`.
#[track_caller]
fn assert_refused(
    case: &str,
    p: &mut Pair,
    code: MrspErrorCode,
    server_before: &[Act],
    cause: Error,
) {
    p.connect();
    assert_eq!(p.take(Side::Server), [RECV_MSG], "{case}");
    p.snic.hold_completions = true;
    begin_mrsp(p);
    let client = p.take(Side::Client);
    assert!(
        matches!(client.as_slice(), [RECV_MSG, Act::Send(_), Act::Failed(Error::MrspRejected(c))] if *c == code),
        "{case}: {client:?}"
    );
    let mut expected = server_before.to_vec();
    expected.push(Act::Send(4));
    assert_eq!(p.take(Side::Server), expected, "{case}");
    assert_eq!(p.snic.sent, [vec![0x00, code as u8, 0, 0]], "{case}");
    assert_eq!(
        p.server.phase(),
        Phase::MrspSending,
        "{case}: waits for its SEND to complete"
    );
    let failed = [Act::Failed(cause), Act::Disconnect];
    assert_eq!(release(p, Side::Server), failed, "{case}");
    let phases = (p.client.phase(), p.server.phase());
    assert_eq!(phases, (Phase::Error, Phase::Error), "{case}");
    assert_eq!(
        p.take(Side::Client),
        [],
        "{case}: the client already failed"
    );
}

/// Server configurations the NAA refuses vector B's request under, with the code it sends
/// (and reports).
#[test]
fn mrsp_refused_by_the_configuration() {
    type Change = fn(&mut ServerConfig);
    let memory = MrspErrorCode::NotEnoughMemory;
    let address = MrspErrorCode::InvalidAddress;
    let cases: [(&str, Change, MrspErrorCode); 4] = [
        (
            "total one byte over max_total_bytes",
            |c| c.max_total_bytes = B_TOTAL - 1,
            memory,
        ),
        (
            "window above every region",
            |c| c.placement = window(0x2000_0000, 0x10_0000),
            address,
        ),
        // The first region (i0 at 0x1000_0000) starts one page before the window.
        (
            "window starting after i0",
            |c| c.placement = window(0x1000_1000, 0x10_0000),
            address,
        ),
        (
            "window ending inside p2",
            |c| c.placement = window(0x1000_0000, 0x40FF),
            memory,
        ),
    ];
    for (case, change, code) in cases {
        let mut p = vector_b_with(1, config(change));
        assert_refused(case, &mut p, code, &[], Error::MrspRejected(code));
    }
}

#[test]
fn mrsp_too_many_regions() {
    let mut p = vector_b_with(1, config(|c| c.max_regions = 3));
    let cause = Error::TooManyRegions { count: 4, max: 3 };
    assert_refused(
        "max_regions 3",
        &mut p,
        MrspErrorCode::TooManyRegions,
        &[],
        cause,
    );
}

#[test]
fn mrsp_total_exactly_at_the_limit_is_accepted() {
    vector_b_with(1, config(|c| c.max_total_bytes = B_TOTAL)).mrsp();
}

#[test]
fn mrsp_assignment_failed() {
    let mut p = vector_b(1);
    p.alloc_mode = AllocMode::FailAt(1);
    let code = MrspErrorCode::NotEnoughMemory;
    let cause = Error::MrspRejected(code);
    assert_refused("region 1 not assigned", &mut p, code, &ALLOC_B[..2], cause);
}

/// Vector B with the NAA's host assigning memory by hand, after the MRSP's allocations were
/// asked for and region 0 was assigned.
fn vector_b_region_0_assigned() -> Pair {
    let mut p = vector_b(1);
    p.alloc_mode = AllocMode::Manual;
    p.connect();
    begin_mrsp(&mut p);
    p.take(Side::Server);
    p.assign_next().unwrap();
    p
}

#[test]
fn assignment_failed_only_for_regions_awaiting_memory() {
    let mut p = vector_b_region_0_assigned();
    assert_eq!(
        p.server.assignment_failed(p.now, RegionId::new(0)),
        wrong_phase(Phase::MrspReceiving),
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

/// Runs the MRSP of `p` (in `case`) with the client's AAR edited in flight by `edit`; returns the server's
/// actions after its MRSP receive.
fn corrupt_request(case: &str, mut p: Pair, edit: impl FnOnce(&mut Vec<u8>)) -> (Pair, Vec<Act>) {
    p.connect();
    assert_eq!(p.take(Side::Server), [RECV_MSG], "{case}");
    begin_mrsp_with_edit(&mut p, Side::Client, edit);
    let server = p.take(Side::Server);
    (p, server)
}

/// After [`corrupt_request`] in `case`: the client got an MRSP Error message with `code`
/// (spec §11) before the NAA hung up; the NAA reported the precise `cause`.
#[track_caller]
fn assert_request_refused(
    case: &str,
    p: &mut Pair,
    server: &[Act],
    code: MrspErrorCode,
    cause: Error,
) {
    let failed = [Act::Send(4), Act::Failed(cause), Act::Disconnect];
    assert_eq!(server, failed, "{case}");
    assert_eq!(
        p.snic.sent.last(),
        Some(&vec![0x00, code as u8, 0, 0]),
        "{case}"
    );
    assert_eq!(p.server.phase(), Phase::Error, "{case}");
    let rejected = [
        RECV_MSG,
        Act::Send(100),
        Act::Failed(Error::MrspRejected(code)),
    ];
    assert_eq!(p.take(Side::Client), rejected, "{case}");
    assert_eq!(p.client.phase(), Phase::Error, "{case}");
}

/// Whatever is wrong with the request, the client gets an MRSP Error message with a code
/// (spec §11) before the NAA hangs up; the NAA reports the precise cause.
#[test]
fn mrsp_malformed_request() {
    type Edit = fn(&mut Vec<u8>);
    let invalid = MrspErrorCode::InvalidAddress;
    let bad_flags = |flags| malformed(wire::Error::InvalidFlags { index: 0, flags });
    let cases: [(&str, Edit, MrspErrorCode, Error); 11] = [
        ("flags 0x03", |m| m[4] = 0x03, invalid, bad_flags(0x03)),
        ("flags 0xFF", |m| m[4] = 0xFF, invalid, bad_flags(0xFF)),
        (
            "truncated to 50 bytes",
            |m| m.truncate(50),
            invalid,
            malformed(wire::Error::Truncated {
                needed: 100,
                len: 50,
            }),
        ),
        (
            "reserved type",
            |m| m[0] = 0x03,
            invalid,
            malformed(wire::Error::ReservedType),
        ),
        (
            "unknown type",
            |m| m[0] = 0x07,
            invalid,
            malformed(wire::Error::UnknownType(0x07)),
        ),
        (
            "an Advertisement",
            |m| m[0] = 0x02,
            invalid,
            Error::UnexpectedMessage(wire::MsgType::Advertise),
        ),
        (
            "no records",
            |m| m[1] = 0,
            invalid,
            Error::NoParameterRegions,
        ),
        (
            // The first record becomes the internal one: only internal regions remain.
            "only an internal region",
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
            "region of size 0",
            |m| m[4 + 20..4 + 24].fill(0),
            invalid,
            Error::RegionSize { region: 0, size: 0 },
        ),
        (
            "40 records: beyond the wire limit",
            |m| m[1] = 40,
            MrspErrorCode::TooManyRegions,
            malformed(wire::Error::TooManyRecords(40)),
        ),
        // Regions over 1 GiB are refused with 0x01 (not enough memory), whatever the NAA's
        // per-connection limit.
        (
            "region over 1 GiB",
            |m| m[4 + 20..4 + 24].copy_from_slice(&((1u32 << 30) + 1).to_be_bytes()),
            MrspErrorCode::NotEnoughMemory,
            Error::RegionSize {
                region: 0,
                size: (1 << 30) + 1,
            },
        ),
    ];
    for (case, edit, code, cause) in cases {
        let (mut p, server) = corrupt_request(case, vector_b(1), edit);
        assert_request_refused(case, &mut p, &server, code, cause);
    }
}

#[test]
fn mrsp_requested_placement_overlap() {
    let scfg = config(|c| c.placement = window(0x1000_0000, 0x10_0000));
    // Move p1 (record 1) into p0's page, 32 bytes after p0's start: they overlap.
    let (mut p, server) = corrupt_request("overlap", vector_b_with(1, scfg), |msg| {
        let rec = 4 + 24;
        let word = (u64::from(msg[rec]) << 56) | 0x1000_2020;
        msg[rec..rec + 8].copy_from_slice(&word.to_be_bytes());
    });
    let code = MrspErrorCode::InvalidAddress;
    assert_request_refused("overlap", &mut p, &server, code, Error::MrspRejected(code));
}

/// The client refuses a bad Advertisement; the server completed its MRSP and finishes when
/// the test's client host hangs up.
#[test]
fn mrsp_bad_advertisement() {
    type Edit = fn(&mut Vec<u8>);
    let count = |m: &mut Vec<u8>| {
        m[1] = 2;
        m.truncate(4 + 2 * 16);
    };
    let cases: [(&str, Edit, Error); 4] = [
        (
            "2 records",
            count,
            Error::AdvertCountMismatch {
                expected: 3,
                got: 2,
            },
        ),
        (
            "region 1 too small",
            |m| m[4 + 16 + 12..4 + 16 + 16].copy_from_slice(&999u32.to_be_bytes()),
            Error::AdvertTooSmall {
                region: 1,
                advertised: 999,
                needed: 1000,
            },
        ),
        (
            "region 2 at the end of the address space",
            |m| m[4 + 32..4 + 40].copy_from_slice(&(u64::MAX - 100).to_be_bytes()),
            Error::AdvertAddressOverflow { region: 2 },
        ),
        (
            "truncated to 40 bytes",
            |m| m.truncate(40),
            malformed(wire::Error::Truncated {
                needed: 52,
                len: 40,
            }),
        ),
    ];
    for (case, edit, error) in cases {
        let mut p = vector_b(1);
        p.connect();
        begin_mrsp_with_edit(&mut p, Side::Server, edit);
        let failed = [RECV_MSG, Act::Send(100), Act::Failed(error)];
        assert_eq!(p.take(Side::Client), failed, "{case}");
        let phases = (p.client.phase(), p.server.phase());
        assert_eq!(phases, (Phase::Error, Phase::MrspDone), "{case}");
        p.take(Side::Server);
        p.hang_up(Side::Client);
        p.run();
        assert_eq!(p.take(Side::Server), [Act::Disconnect], "{case}");
        assert_eq!(p.server.phase(), Phase::Finished, "{case}");
    }
}

// ---------------------------------------------------------------------------------------------
// 3. RPC return codes

#[test]
fn unknown_function_code_is_answered_with_socket_unavail() {
    let mut p = vector_b(5);
    p.mrsp();
    let imm = encode_request(fc(5), [0; 3]);
    let before = client_buffers(&p);
    let unavail = ReturnCode::SOCKET_UNAVAIL.to_imm();
    assert_eq!(unavail, 0x100);
    let refused = |rpc| {
        [
            b_call(rpc, imm),
            vec![done(ReturnCode::SOCKET_UNAVAIL, 0, rpc)],
        ]
        .concat()
    };
    // No kernel; one zero-length write WITH IMM to the last output region (D-02).
    let answer = [write(2, 0, Some(unavail)), RECV];
    assert_rpc(&mut p, &refused(1), &answer);
    assert_phases(&p, Phase::Finished, Phase::DataReceiving);
    // The connection stays usable.
    assert_rpc(&mut p, &refused(2), &answer);
    assert_eq!(before, client_buffers(&p), "no client buffer was written");
    assert_phases(&p, Phase::Finished, Phase::DataReceiving);
    assert_eq!(p.server.rpc_count(), 2);
}

#[test]
fn kernel_timeout_late_finish_and_a_waiting_rpc() {
    let mut p = vector_b_manual_kernels();
    let p1 = p.cnic.mem(1).to_vec();
    let p2 = p.cnic.mem(2).to_vec();
    p.advance_to(secs(1));
    assert_rpc(&mut p, &b_call(1, imm1()), &[kernel(1, [0; 3], 1)]);
    assert_eq!(p.server.phase(), Phase::Calculating);
    advance_to_deadline(
        &mut p,
        Side::Server,
        secs(11),
        &[Side::Client, Side::Server],
    );
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
    assert_phases(&p, Phase::Finished, Phase::DataReceiving);
    assert!(p.server.kernel_running());

    // RPC 2 arrives while the stale kernel still runs: it waits.
    assert_rpc(&mut p, &b_call(2, imm1()), &[]);
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
    assert_eq!(p.take(Side::Server), b_write_back(0));
    assert_eq!(p.take(Side::Client), [succeeded(256, 2)]);
    // RPC 2's input landed before the stale kernel returned, so both kernels added 1.
    assert_b_outputs(&p, &p1, 2);
    assert!(!p.server.kernel_running());
    assert_phases(&p, Phase::Finished, Phase::DataReceiving);
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
        assert_eq!(client[3], done(rc, 256, 1), "{rc:?}");
        let mut served = vec![kernel(1, [0; 3], 1)];
        served.extend(b_write_back(u32::from(code) << 8));
        assert_eq!(server, served, "{rc:?}");
        assert_eq!(p.cnic.mem(1), plus(&p1, 1), "{rc:?}");
        assert_eq!(p.cnic.mem(2), [1; 256], "{rc:?}");
        assert_eq!(p.client.phase(), Phase::Finished, "{rc:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Zero inputs and zero outputs (D-08)

#[test]
fn all_inputs_single_send_second_rpc_sends_one_empty_write() {
    let mut p = pair_after_mrsp(&[(64, 0x06), (128, 0x08)], &[], 1);
    let p0 = p.cnic.mem(0).to_vec();
    let served = |rpc| [kernel(1, [0; 3], rpc), write(1, 128, Some(0)), RECV];
    let client = [write(0, 64, Some(imm1())), RECV, succeeded(128, 1)];
    assert_rpc(&mut p, &client, &served(1));
    for rpc in 2..4 {
        let client = [write(0, 0, Some(imm1())), RECV, succeeded(128, rpc)];
        assert_rpc(&mut p, &client, &served(rpc));
        assert_eq!(p.snic.mem(0), plus(&p0, rpc as u8), "kept, not overwritten");
        assert_eq!(p.cnic.mem(1), vec![rpc as u8; 128], "RPC {rpc}");
    }
}

#[test]
fn no_output_region_reply_is_one_empty_write() {
    let mut p = pair_after_mrsp(&[(64, 0x04)], &[32], 1);
    let p0 = p.cnic.mem(0).to_vec();
    let client = [write(0, 64, Some(imm1())), RECV, succeeded(0, 1)];
    assert_rpc(
        &mut p,
        &client,
        &[kernel(1, [0; 3], 1), write(0, 0, Some(0)), RECV],
    );
    assert_eq!(p.cnic.mem(0), p0);
    assert_eq!(p.snic.mem(0), plus(&p0, 1));
    assert_phases(&p, Phase::Finished, Phase::DataReceiving);
    let (client, _) = p.rpc();
    assert_eq!(client[2], succeeded(0, 2));
}

#[test]
fn client_without_inputs() {
    let mut p = pair_after_mrsp(&[(256, 0x08), (16, 0x00)], &[], 2);
    let imm = encode_request(fc(2), [0; 3]);
    for rpc in 1..3 {
        let client = [write(0, 0, Some(imm)), RECV, succeeded(256, rpc)];
        let server = [kernel(2, [0; 3], rpc), write(0, 256, Some(0)), RECV];
        assert_rpc(&mut p, &client, &server);
        assert_eq!(p.cnic.mem(0), vec![2 * rpc as u8; 256], "RPC {rpc}");
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Reordering

#[test]
fn reply_before_own_write_completions_d20() {
    let mut p = vector_b_after_mrsp();
    let p1 = p.cnic.mem(1).to_vec();
    p.cnic.hold_completions = true;
    assert_rpc(&mut p, &b_call(1, imm1()), &b_served(1, [0; 3], 1));
    assert_eq!(
        p.client.phase(),
        Phase::DataSending,
        "the reply is in, the writes are not"
    );
    assert_eq!(release(&mut p, Side::Client), [succeeded(256, 1)]);
    assert_eq!(p.client.phase(), Phase::Finished);
    assert_eq!(p.cnic.mem(1), plus(&p1, 1));

    // And again, with only the in-place input left to write.
    p.cnic.hold_completions = true;
    let (client, _) = p.rpc();
    assert_eq!(client, b_call(2, imm1()));
    assert_eq!(p.client.phase(), Phase::DataSending);
    assert_eq!(release(&mut p, Side::Client), [succeeded(256, 2)]);
    assert_eq!(p.cnic.mem(1), plus(&p1, 2));
}

#[test]
fn advertisement_before_own_send_completion() {
    let mut p = vector_b(1);
    p.connect();
    p.cnic.hold_completions = true;
    begin_mrsp(&mut p);
    assert_eq!(p.take(Side::Client), [RECV_MSG, Act::Send(100)]);
    assert_eq!(p.client.phase(), Phase::MrspSending);
    assert_eq!(release(&mut p, Side::Client), [RECV, Act::MrspComplete]);
    assert_eq!(p.client.phase(), Phase::MrspDone);
    let (client, _) = p.rpc();
    assert_eq!(client[3], succeeded(256, 1));
}

#[test]
fn next_request_before_the_servers_write_completions() {
    let mut p = vector_b_after_mrsp();
    p.snic.hold_completions = true;
    let (client, server) = p.rpc();
    assert_eq!(client[3], succeeded(256, 1));
    assert_eq!(server, b_served(1, [0; 3], 1));
    assert_eq!(p.server.phase(), Phase::DataSending);
    // The client goes on at once; the NAA has a receive for it (§3.9) and queues the call.
    assert_rpc(&mut p, &b_call(2, imm1()), &[]);
    assert_eq!(p.snic.recvs.len(), 1);
    assert_eq!(p.server.phase(), Phase::DataSending);
    assert_eq!(release(&mut p, Side::Server), b_served(1, [0; 3], 2));
    assert_eq!(p.take(Side::Client), [succeeded(256, 2)]);
    assert_eq!(p.cnic.mem(2), [2; 256]);
    assert!(matches!(p.server_min_recvs, Some(n) if n >= 1));
}

#[test]
fn first_request_before_the_advertisement_send_completion() {
    let mut p = vector_b(1);
    p.connect();
    p.take(Side::Server);
    p.snic.hold_completions = true;
    begin_mrsp(&mut p);
    assert_eq!(p.take(Side::Client), CLIENT_MRSP);
    assert_eq!(p.server.phase(), Phase::MrspSending);
    let server = [&ALLOC_B[..], &ADVERTISE_B].concat();
    assert_rpc(&mut p, &b_call(1, imm1()), &server);
    let server = [&[Act::MrspComplete][..], &b_served(1, [0; 3], 1)].concat();
    assert_eq!(release(&mut p, Side::Server), server);
    assert_eq!(p.take(Side::Client), [succeeded(256, 1)]);
}

#[test]
fn established_after_the_request_is_tolerated() {
    // The passive side may see the first receive complete before its ESTABLISHED event.
    let mut p = vector_b(1);
    p.run();
    p.client.handle_input(p.now, Input::AddressResolved);
    p.client.handle_input(p.now, Input::Established);
    begin_mrsp(&mut p);
    assert_eq!(p.take(Side::Client), CLIENT_MRSP);
    assert_eq!(p.server.phase(), Phase::MrspDone);
    p.server.handle_input(p.now, Input::Established);
    p.run();
    let server = [
        &[RECV_MSG][..],
        &ALLOC_B,
        &ADVERTISE_B,
        &[Act::MrspComplete],
    ]
    .concat();
    assert_eq!(p.take(Side::Server), server);
    assert_eq!(p.server.phase(), Phase::MrspDone);
    let (client, _) = p.rpc();
    assert_eq!(client[3], succeeded(256, 1));
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
    let mut p = vector_b_with(
        1,
        config(|c| c.completion_timeout = Duration::from_secs(30)),
    );
    p.connect();
    p.snic.hold_wire = true; // The Advertisement never arrives.
    p.advance_to(secs(1));
    begin_mrsp(&mut p);
    assert_eq!(p.take(Side::Client), [RECV_MSG, Act::Send(100)]);
    assert_eq!(p.client.phase(), Phase::MrspReceiving);
    advance_to_deadline(&mut p, Side::Client, secs(11), &[Side::Client]);
    assert_eq!(p.take(Side::Client), [timed_out(Phase::MrspReceiving)]);
    assert_eq!(
        (p.client.phase(), p.client.poll_timeout()),
        (Phase::Error, None)
    );
    // The server's own SEND never completes either.
    assert_eq!(p.server.poll_timeout(), Some(secs(31)));
    p.take(Side::Server);
    p.advance_to(secs(31));
    let failed = [timed_out(Phase::MrspSending), Act::Disconnect];
    assert_eq!(p.take(Side::Server), failed);
}

#[test]
fn client_rpc_timeout() {
    let mut ccfg = ClientConfig::new(fc(1));
    ccfg.rpc_timeout = Duration::from_secs(5);
    let mut p = Pair::new(&B_PARAMS, &B_INTERNAL, ccfg, server_config());
    p.kernel_mode = KernelMode::Manual;
    p.mrsp();
    p.advance_to(secs(2));
    assert_rpc(&mut p, &b_call(1, imm1()), &[kernel(1, [0; 3], 1)]);
    advance_to_deadline(&mut p, Side::Client, secs(7), &[Side::Client]);
    assert_eq!(p.take(Side::Client), [timed_out(Phase::DataReceiving)]);
    assert_eq!(p.client.phase(), Phase::Error);
    assert_eq!(p.take(Side::Server), []);

    // A per-call deadline overrides the configured one.
    let mut p = vector_b_manual_kernels();
    let args = RpcArgs {
        timeout: Duration::from_millis(1500),
        ..p.args()
    };
    p.client.start_rpc(p.now, args).unwrap();
    p.run();
    assert_eq!(p.client.poll_timeout(), Some(Instant::from_millis(1500)));
    p.take(Side::Client);
    p.advance_to(Instant::from_millis(1500));
    assert_eq!(p.take(Side::Client), [timed_out(Phase::DataReceiving)]);
}

#[test]
fn server_mrsp_timeout() {
    let mut p = vector_b(1);
    p.connect();
    p.take(Side::Server);
    advance_to_deadline(&mut p, Side::Server, secs(10), &[Side::Server]);
    let failed = [timed_out(Phase::MrspReceiving), Act::Disconnect];
    assert_eq!(p.take(Side::Server), failed);
    assert_eq!(p.server.phase(), Phase::Error);
    // The client was idle: it just sees the disconnect.
    assert_eq!(p.take(Side::Client), []);
    assert_eq!(p.client.phase(), Phase::Disconnected);
    assert_eq!(p.client.start_mrsp(p.now), wrong_phase(Phase::Disconnected));
}

#[test]
fn server_idle_timeout() {
    let mut p = vector_b_with(
        1,
        config(|c| c.idle_timeout = Some(Duration::from_secs(30))),
    );
    p.mrsp();
    assert_eq!(p.server.poll_timeout(), Some(secs(30)));
    p.advance_to(secs(20));
    let (client, _) = p.rpc();
    assert_eq!(client[3], succeeded(256, 1));
    advance_to_deadline(&mut p, Side::Server, secs(50), &[Side::Server]);
    let failed = [timed_out(Phase::DataReceiving), Act::Disconnect];
    assert_eq!(p.take(Side::Server), failed);
    assert_eq!(p.take(Side::Client), []);
    assert_phases(&p, Phase::Disconnected, Phase::Error);
}

#[test]
fn server_completion_timeout() {
    let mut p = vector_b_after_mrsp();
    p.advance_to(secs(3));
    p.snic.hold_completions = true; // The NAA never sees its write-back complete.
    let (client, server) = p.rpc();
    assert_eq!(client[3], succeeded(256, 1));
    assert_eq!(server.len(), 4);
    assert_eq!(p.server.poll_timeout(), Some(secs(13)));
    p.advance_to(secs(13));
    let failed = [timed_out(Phase::DataSending), Act::Disconnect];
    assert_eq!(p.take(Side::Server), failed);
    assert_phases(&p, Phase::Disconnected, Phase::Error);
}

#[test]
fn server_disconnects_mid_rpc() {
    let mut p = vector_b_manual_kernels();
    let (_, server) = p.rpc();
    assert_eq!(server, [kernel(1, [0; 3], 1)]);
    assert_eq!(p.client.phase(), Phase::DataReceiving);
    p.hang_up(Side::Server);
    p.run();
    assert_eq!(p.take(Side::Client), [Act::Failed(PEER_GONE_MID_RPC)]);
    assert_eq!(
        (p.client.phase(), p.client.poll_timeout()),
        (Phase::Error, None)
    );
}

#[test]
fn client_disconnects_mid_rpc() {
    // While the kernel runs: the late kernel_finished must not write anything back.
    let mut p = vector_b_manual_kernels();
    p.rpc();
    assert_eq!(p.server.phase(), Phase::Calculating);
    client_hangs_up(&mut p);
    assert_eq!(p.finish_kernel(ReturnCode::SUCCESS), Ok(()));
    p.run();
    assert_eq!(p.take(Side::Server), []);
    assert_eq!(p.server.phase(), Phase::Finished);
    assert!(!p.server.kernel_running());

    // While the write-back is in flight.
    let mut p = vector_b_after_mrsp();
    p.snic.hold_wire = true;
    let (_, server) = p.rpc();
    assert_eq!(server.len(), 4);
    assert_eq!(p.server.phase(), Phase::DataSending);
    client_hangs_up(&mut p);
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
    client_hangs_up(&mut p);

    // While the NAA allocates: late answers are refused and change nothing.
    let mut p = vector_b_region_0_assigned();
    client_hangs_up(&mut p);
    assert_eq!(p.assign_next(), wrong_phase(Phase::Finished));
    assert_eq!(
        p.server.assignment_failed(p.now, RegionId::new(2)),
        wrong_phase(Phase::Finished)
    );
    p.run();
    assert_eq!(p.take(Side::Server), []);
    assert_eq!(p.server.phase(), Phase::Finished);

    // With the Advertisement in flight.
    let mut p = vector_b(1);
    p.snic.hold_wire = true;
    p.connect();
    begin_mrsp(&mut p);
    p.take(Side::Server);
    assert_eq!(p.server.phase(), Phase::MrspSending);
    p.snic.hold_wire = false;
    client_hangs_up(&mut p);
}

/// Vector B after an MRSP in which `side`'s message had the rkey at `at` replaced by `rkey`
/// in flight.
fn vector_b_with_rkey_replaced(side: Side, at: usize, rkey: u32) -> Pair {
    let mut p = vector_b(1);
    p.connect();
    begin_mrsp_with_edit(&mut p, side, |m| {
        m[at..at + 4].copy_from_slice(&rkey.to_be_bytes());
    });
    p.take(Side::Client);
    p.take(Side::Server);
    p
}

/// The remote access error of the write `write`, which must be one.
fn remote_access_error(write: Action) -> Act {
    let Action::Write(w) = write else {
        panic!("not a write: {write:?}")
    };
    Act::Failed(Error::WorkFailed {
        wr_id: w.wr_id,
        error: WorkError::RemoteAccess,
    })
}

#[test]
fn remote_access_error_on_the_client_write() {
    // The rkey of Advertisement record 1.
    let mut p = vector_b_with_rkey_replaced(Side::Server, 4 + 16 + 8, 0xDEAD_BEEF);
    let (client, server) = rpc_actions(&mut p);
    let Action::Write(w) = client[1] else {
        panic!("{client:?}")
    };
    assert_eq!(w.rkey, 0xDEAD_BEEF);
    let failed = remote_access_error(client[1]);
    let expected = [&b_call(1, imm1())[..], &[failed]].concat();
    assert_eq!(compact(&client), expected);
    assert_eq!(p.client.phase(), Phase::Error);
    assert_eq!(server, [], "nothing reached the NAA's receive queue");
    // The client's host tears down; the NAA follows.
    client_hangs_up(&mut p);
}

#[test]
fn remote_access_error_on_the_server_write_back() {
    // The rkey the client publishes for p2 (record 2).
    let mut p = vector_b_with_rkey_replaced(Side::Client, 4 + 48 + 16, 0xBAD0_0000);
    let p1 = p.cnic.mem(1).to_vec();
    let (client, server) = rpc_actions(&mut p);
    let failed = remote_access_error(server[2]);
    let expected = [b_served(1, [0; 3], 1), vec![failed, Act::Disconnect]].concat();
    assert_eq!(compact(&server), expected);
    let expected = [&b_call(1, imm1())[..], &[Act::Failed(PEER_GONE_MID_RPC)]].concat();
    assert_eq!(compact(&client), expected);
    // The first output had landed; the failed one did not.
    assert_eq!(p.cnic.mem(1), plus(&p1, 1));
    assert_ne!(p.cnic.mem(2), [1; 256]);
    assert_phases(&p, Phase::Error, Phase::Error);
}

#[test]
fn failed_data_receive_sends_the_error_write_d07() {
    let mut p = vector_b_after_mrsp();
    // The receive posted ahead for RPC 2 (after RPC 1's writes) fails: it is only
    // forgotten, and RPC 1 ends as usual.
    p.cnic.fail_data_recv = true;
    let (client, _) = p.rpc();
    assert_eq!(client, b_rpc_ok(1, imm1()));
    assert!(
        !p.cnic.fail_data_recv,
        "the receive posted ahead was refused"
    );
    assert_eq!(p.cnic.recvs.len(), 0);
    let before = client_buffers(&p);
    let server_r1 = p.snic.mem(1).to_vec();

    // RPC 2 posts its reply's receive itself, before its writes; that fails too.
    p.cnic.fail_data_recv = true;
    let (client, server) = rpc_actions(&mut p);
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
    let expected = [
        RECV,
        write(0, 0, Some(0)),
        Act::Failed(Error::PostFailed(wr_id)),
    ];
    assert_eq!(compact(&client), expected);
    assert_eq!(p.client.phase(), Phase::Error);
    // The NAA must not run the previous kernel on stale data (D-07).
    let signalled = [Act::Failed(Error::ClientSignalledError), Act::Disconnect];
    assert_eq!(compact(&server), signalled);
    assert_eq!(p.server.phase(), Phase::Error);
    assert_eq!(p.server.rpc_count(), 1);
    assert_eq!(before, client_buffers(&p));
    assert_eq!(p.snic.mem(1), server_r1);
}

#[test]
fn error_write_queued_behind_the_write_back_d07() {
    // The client's error write reaches the NAA while its write-back is still completing: the
    // queued "call" must still end the connection, not run the kernel.
    let mut p = vector_b_after_mrsp();
    p.snic.hold_completions = true;
    // The receive posted ahead for RPC 2 fails (forgotten), then RPC 2's own.
    p.cnic.fail_data_recv = true;
    let (client, _) = p.rpc();
    assert_eq!(client[3], succeeded(256, 1));
    p.cnic.fail_data_recv = true;
    let (client, server) = p.rpc();
    assert_eq!(client[1], write(0, 0, Some(0)));
    assert_eq!(server, []);
    let signalled = [Act::Failed(Error::ClientSignalledError), Act::Disconnect];
    assert_eq!(release(&mut p, Side::Server), signalled);
    assert_phases(&p, Phase::Error, Phase::Error);
}

// ---------------------------------------------------------------------------------------------
// 7. Commands in the wrong phase

#[test]
fn commands_in_the_wrong_phase_change_nothing() {
    let mut p = vector_b(1);
    p.run();
    p.take(Side::Server);
    assert_eq!(p.client.start_mrsp(p.now), wrong_phase(Phase::Init));
    p.connect();
    // start_rpc before the MRSP.
    assert_eq!(
        p.client.start_rpc(p.now, p.args()),
        wrong_phase(Phase::Connected)
    );
    // kernel_finished without a kernel.
    assert_eq!(
        p.server.kernel_finished(p.now, ReturnCode::SUCCESS),
        wrong_phase(Phase::MrspReceiving)
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
    assert_eq!(p.client.start_mrsp(p.now), wrong_phase(Phase::MrspSending));
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
    assert_eq!(p.assign(first), wrong_phase(Phase::MrspReceiving));
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
    let advertised = [&ADVERTISE_B[..], &[Act::MrspComplete]].concat();
    assert_eq!(p.take(Side::Server), advertised);
    assert_eq!(p.take(Side::Client), [RECV, Act::MrspComplete]);
    assert_eq!(
        p.snic.sent,
        [B_ADV.to_vec()],
        "region 0 kept its first assignment"
    );
    assert_eq!(p.assign(first), wrong_phase(Phase::MrspDone));
    assert_eq!(
        p.server.assignment_failed(p.now, RegionId::new(0)),
        wrong_phase(Phase::MrspDone)
    );

    // kernel_finished without a kernel after the MRSP; commands during an RPC.
    assert_eq!(
        p.server.kernel_finished(p.now, ReturnCode::SUCCESS),
        wrong_phase(Phase::MrspDone)
    );
    p.kernel_mode = KernelMode::Manual;
    p.client.start_rpc(p.now, p.args()).unwrap();
    let busy = wrong_phase(Phase::DataSending);
    assert_eq!(p.client.start_rpc(p.now, p.args()), busy);
    assert_eq!(p.client.set_bytes_to_send(RegionId::new(1), Some(10)), busy);
    p.run();
    assert_eq!(p.take(Side::Client), b_call(1, imm1()));
    assert_eq!(p.take(Side::Server), [kernel(1, [0; 3], 1)]);
    p.finish_kernel(ReturnCode::SUCCESS).unwrap();
    assert_eq!(
        p.server.kernel_finished(p.now, ReturnCode::SUCCESS),
        wrong_phase(Phase::DataSending)
    );
    p.run();
    assert_eq!(p.take(Side::Client), [succeeded(256, 1)]);
    assert_eq!(p.client.start_mrsp(p.now), wrong_phase(Phase::Finished));
    assert_phases(&p, Phase::Finished, Phase::DataReceiving);
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
    begin_rpc(&mut p);
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
    begin_rpc(&mut p);
    p.advance(Duration::from_secs(10));
    assert_eq!(
        p.client.last_result().map(|r| r.status),
        Some(ReturnCode::KERNEL_TIMEOUT)
    );
    assert!(p.server.kernel_running() && p.server.error().is_none());
    p.finish_kernel(ReturnCode::SUCCESS).unwrap();
    assert!(!p.server.kernel_running());

    // The connection breaks mid-RPC: the client keeps the terminal error, the server ends.
    begin_rpc(&mut p);
    p.hang_up(Side::Client);
    p.client.handle_input(p.now, Input::Disconnected);
    p.run();
    assert_eq!(
        (p.server.phase(), p.server.error()),
        (Phase::Finished, None)
    );
    assert_eq!(
        (p.client.phase(), p.client.error()),
        (Phase::Error, Some(PEER_GONE_MID_RPC))
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

/// Vector B after one RPC, and the receive the client posted ahead for its next RPC's reply.
fn vector_b_after_one_rpc() -> (Pair, WrId) {
    let mut p = vector_b_after_mrsp();
    begin_rpc(&mut p);
    let actions = p.take_actions(Side::Client);
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
    (p, wr_id)
}

#[test]
fn a_flushed_receive_posted_ahead_leaves_the_disconnect_to_say_so() {
    // Either order of the flush and the disconnect event: between RPCs the client just sees
    // the disconnect, as when it had no receive posted.
    for flush_first in [false, true] {
        let (mut p, spare) = vector_b_after_one_rpc();
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
        assert_eq!(p.take(Side::Client), [], "flush first: {flush_first}");
        assert_eq!(
            (p.client.phase(), p.client.error()),
            (Phase::Disconnected, None),
            "flush first: {flush_first}"
        );
    }
}

#[test]
fn a_receive_posted_ahead_that_fails_otherwise_fails_the_connection() {
    let (mut p, spare) = vector_b_after_one_rpc();
    // A SEND into the data receive (no buffer) between RPCs: a peer's error, not a flush.
    let error = WorkError::LocalLength;
    p.client.handle_input(
        p.now,
        Input::WorkFailed {
            wr_id: spare,
            error,
        },
    );
    p.run();
    let failed = Error::WorkFailed {
        wr_id: spare,
        error,
    };
    assert_eq!(p.take(Side::Client), [Act::Failed(failed)]);
    assert_eq!(p.client.phase(), Phase::Error);
}

#[test]
fn a_stray_reply_between_rpcs_meets_the_receive_posted_ahead_and_fails() {
    let (mut p, spare) = vector_b_after_one_rpc();
    // The NAA writes WITH IMM with no RPC in flight: the receive posted ahead takes it.
    let stray = Input::WriteImmReceived {
        wr_id: spare,
        imm: 0,
        len: 0,
    };
    p.client.handle_input(p.now, stray);
    p.run();
    let unexpected = Error::Unexpected {
        phase: Phase::Finished,
    };
    assert_eq!(p.take(Side::Client), [Act::Failed(unexpected)]);
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
    assert_eq!(client, b_rpc_ok(2, imm));
    // And loses it again: SOCKET_UNAVAIL, the connection stays usable.
    p.server
        .set_kernels(KernelSet::empty(), Duration::from_secs(10));
    let (client, _) = p.rpc();
    assert_eq!(client.last(), Some(&done(ReturnCode::SOCKET_UNAVAIL, 0, 3)));
    assert_eq!(p.server.phase(), Phase::DataReceiving);
}
