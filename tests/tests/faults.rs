//! Deadlines and error paths of clients and the software NAA, driven by the software
//! transport's fault injection (`SoftConfig::faults`): a frame dropped, delayed, or the
//! connection reset at a chosen point. Each fault strikes once, deterministically; the test
//! then checks the error the client gets and that the NAA (one connection slot only) frees
//! the slot and serves the next client. The timeouts are short so the tests stay fast; they
//! are ordered far apart, so no outcome depends on timing.

use std::time::Duration;

use naaice::core::machine::{Error as MachineError, WorkError};
use naaice::core::{ClientConfig, Phase};
use naaice::swnaa::{SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::{
    FaultAction, FaultPlan, FrameKind, SoftConfig, SoftEndpoint, SoftTransport,
};
use naaice::{Buffer, Connection, Error, Naa, NaaOptions, Param};
use naaice_tests::{code, connect_within, loopback, test_kernels};

/// The clients' ACK timeout where it does not matter.
const SLOW: Duration = Duration::from_secs(10);
/// How long a test waits for the NAA to free its slot (a bound, not a measurement).
const RECOVERY: Duration = Duration::from_secs(20);

/// A transport with `faults` and an ACK timeout of `ack_timeout`.
fn transport(faults: FaultPlan, ack_timeout: Duration) -> SoftTransport {
    SoftTransport::new(SoftConfig {
        ack_timeout,
        faults,
        ..SoftConfig::default()
    })
}

/// A software NAA with one connection slot whose transport injects `faults`.
fn naa(faults: FaultPlan) -> SoftNaaHandle {
    let config = SoftNaaConfig {
        max_connections: 1,
        mrsp_timeout: Duration::from_secs(2),
        completion_timeout: Duration::from_secs(2),
        ..SoftNaaConfig::default()
    };
    let transport = transport(faults, Duration::from_millis(500));
    SoftNaa::bind(transport, loopback(), config, test_kernels())
        .expect("bind software NAA")
        .spawn()
        .expect("spawn software NAA")
}

/// Where a scenario injects its fault.
enum Side {
    /// Into the software NAA's transport.
    Naa,
    /// Into the client's transport.
    Client,
}

/// One scenario: an NAA with one slot, one client for function 1 with an in-place region of
/// 3 bytes (its timeouts from `config`, its transport's ACK timeout `client_ack`), `plan`
/// injected on `side`. `run` plays the client's
/// part (MRSP and RPC included) and checks what it gets; then the fault must have struck
/// once, and the NAA must free the slot and serve the next client.
fn scenario(
    side: Side,
    plan: FaultPlan,
    client_ack: Duration,
    config: ClientConfig,
    run: impl FnOnce(&mut Connection<SoftEndpoint>, &Buffer),
) {
    let (naa_plan, client_plan) = match side {
        Side::Naa => (plan.clone(), FaultPlan::new()),
        Side::Client => (FaultPlan::new(), plan.clone()),
    };
    let naa = naa(naa_plan);
    let client = transport(client_plan, client_ack);
    let mut conn = Connection::connect(&client, naa.local_addr(), None, config).expect("connect");
    let buf = Buffer::from_slice(&[1, 2, 3]);
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.set_output(id).unwrap();
    run(&mut conn, &buf);
    assert_eq!(plan.fired(), 1, "the fault did not strike once");
    drop(conn);
    serves_the_next_client(&naa);
}

/// The NAA frees the slot of the client hit by the fault and serves the next one: a fault-free
/// client (retrying while the one slot is still taken) gets correct results.
fn serves_the_next_client(naa: &SoftNaaHandle) {
    let mut conn = connect_within(naa.local_addr(), RECOVERY, "the slot was not freed");
    let buf = Buffer::from_slice(&[1, 2, 3]);
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.set_output(id).unwrap();
    conn.do_mrsp().expect("MRSP after the fault");
    for round in 1..=3u8 {
        assert!(conn.do_transfer().unwrap().status.is_success());
        assert_eq!(buf.to_vec(), [1 + round, 2 + round, 3 + round]);
    }
}

fn config(mrsp_timeout: Duration, rpc_timeout: Duration) -> ClientConfig {
    ClientConfig {
        mrsp_timeout,
        rpc_timeout,
        ..ClientConfig::new(code(1))
    }
}

#[test]
fn dropped_mrsp_response_is_the_clients_mrsp_timeout() {
    // The NAA's first SEND is its MRSP response.
    let plan = FaultPlan::new().on_sent(FrameKind::Send, 1, FaultAction::Drop);
    let config = config(Duration::from_millis(300), Duration::from_secs(60));
    scenario(Side::Naa, plan, SLOW, config, |conn, _| {
        let err = conn.do_mrsp().expect_err("no MRSP response arrives");
        assert_timeout(&err, Phase::MrspReceiving);
    });
}

#[test]
fn dropped_final_write_with_imm_is_the_clients_rpc_timeout_naming_the_phase() {
    // The NAA's first WRITE WITH IMMEDIATE carries the first RPC's result.
    let plan = FaultPlan::new().on_sent(FrameKind::WriteImm, 1, FaultAction::Drop);
    let config = config(Duration::from_secs(10), Duration::from_millis(300));
    scenario(Side::Naa, plan, SLOW, config, |conn, _| {
        conn.do_mrsp().unwrap();
        let err = conn.do_transfer().expect_err("no result arrives");
        assert_timeout(&err, Phase::DataReceiving);
        assert!(err.to_string().contains("DATA_RECEIVING"), "{err}");
    });
}

#[test]
fn client_side_reset_mid_rpc_is_a_disconnect_error_and_frees_the_slot() {
    // The client's final WRITE WITH IMMEDIATE (its first: the MRSP is SENDs) resets instead.
    let plan = FaultPlan::new().on_sent(FrameKind::WriteImm, 1, FaultAction::Reset);
    scenario(
        Side::Client,
        plan,
        SLOW,
        ClientConfig::new(code(1)),
        reset_mid_rpc,
    );
}

#[test]
fn server_side_reset_mid_rpc_is_a_disconnect_error_for_the_client() {
    // The NAA resets the connection when the client's final write arrives.
    let plan = FaultPlan::new().on_received(FrameKind::WriteImm, 1, FaultAction::Reset);
    scenario(
        Side::Naa,
        plan,
        SLOW,
        ClientConfig::new(code(1)),
        reset_mid_rpc,
    );
}

#[test]
fn ack_delayed_past_the_clients_ack_timeout_fails_its_request() {
    // The NAA's first ACK (for the MRSP request) is held far longer than the client's ACK
    // timeout: the client's SEND fails with RetryExceeded (no retransmission over TCP).
    let late = FaultAction::Delay(Duration::from_secs(1));
    let plan = FaultPlan::new().on_sent(FrameKind::Ack, 1, late);
    let fast = Duration::from_millis(100);
    scenario(
        Side::Naa,
        plan,
        fast,
        ClientConfig::new(code(1)),
        |conn, _| {
            let err = conn.do_mrsp().expect_err("the ACK comes too late");
            assert!(
                matches!(
                    err,
                    Error::Protocol(MachineError::WorkFailed {
                        error: WorkError::RetryExceeded,
                        ..
                    })
                ),
                "unexpected error: {err}"
            );
        },
    );
}

#[test]
fn ack_delayed_within_the_ack_timeout_is_only_late() {
    let late = FaultAction::Delay(Duration::from_millis(50));
    let plan = FaultPlan::new().on_sent(FrameKind::Ack, 1, late);
    scenario(
        Side::Naa,
        plan,
        SLOW,
        ClientConfig::new(code(1)),
        |conn, buf| {
            conn.do_mrsp().unwrap();
            assert!(conn.do_transfer().unwrap().status.is_success());
            assert_eq!(buf.to_vec(), [2, 3, 4]);
        },
    );
}

#[test]
fn middleware_wait_on_a_dropped_result_times_out_naming_the_phase() {
    // The same fault through AP2 (create / invoke / wait / finalize).
    let plan = FaultPlan::new().on_sent(FrameKind::WriteImm, 1, FaultAction::Drop);
    let naa = naa(plan.clone());
    let options = NaaOptions {
        rpc_timeout: Duration::from_millis(300),
        ..NaaOptions::at(naa.local_addr())
    };
    let params = vec![Param::from_vec(vec![1, 2, 3])];
    let mut handle =
        Naa::create_with(&SoftTransport::default(), 1, params, vec![], &options).expect("create");
    handle.invoke().unwrap();
    let err = handle.wait().expect_err("no result arrives");
    assert_timeout(&err, Phase::DataReceiving);
    handle.finalize();
    assert_eq!(plan.fired(), 1);
    serves_the_next_client(&naa);
}

fn assert_timeout(err: &Error, phase: Phase) {
    assert!(
        matches!(err, Error::Protocol(MachineError::Timeout { phase: p })
            | Error::RpcTimeout { phase: p, .. } if *p == phase),
        "expected a timeout in {phase:?}, got: {err}"
    );
}

/// MRSP, then an RPC that a reset cuts off: a disconnect error that says so.
fn reset_mid_rpc(conn: &mut Connection<SoftEndpoint>, _: &Buffer) {
    conn.do_mrsp().unwrap();
    let err = conn.do_transfer().expect_err("the connection was reset");
    let text = err.to_string();
    assert!(
        text.contains("disconnect") && !text.contains("posting work request"),
        "unclear error: {text}"
    );
}
