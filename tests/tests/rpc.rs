//! End-to-end RPCs over the software transport: a software NAA on loopback, clients through
//! AP1 (`Connection`) and AP2 (`Naa`). Region counts 1…32, sizes 1 B…64 MiB, single-send and
//! internal regions, 1000 RPCs on one connection, 16 concurrent clients, and every error code
//! (MRSP errors, SOCKET_UNAVAIL, KERNEL_TIMEOUT, application codes, kernel panics, the
//! connection limit, RPC deadlines). The transport-independent bodies are in
//! `naaice_tests::suite`, shared with the verbs suite.

use std::time::{Duration, Instant};

use naaice::core::machine::Error as ProtocolError;
use naaice::swnaa::SoftNaaConfig;
use naaice::transport::soft::SoftTransport;
use naaice::{Buffer, Error, Naa, NaaOptions, Param};
use naaice_tests::suite::Site;
use naaice_tests::{SLEEP, start_naa};

// The shared bodies of `naaice_tests::suite`, each a test over the software transport.
naaice_tests::suite_tests!(|_, body: fn(&Site)| body(&Site::soft()));

naaice_tests::suite_scale_tests!(Site::soft());

#[test]
fn rpc_deadline_fails_the_call_in_time() {
    let naa = start_naa(SoftNaaConfig::default());
    let mut conn = Site::soft().connect(&naa, SLEEP);
    let buf = Buffer::zeroed(8);
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.do_mrsp().unwrap();
    conn.set_immediate([200, 0, 0]).unwrap(); // 2 s kernel
    let t = Instant::now();
    conn.init_transfer_with_timeout(Duration::from_millis(200))
        .unwrap();
    match conn.wait() {
        Err(Error::RpcTimeout { deadline, .. }) if deadline == Duration::from_millis(200) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(1500),
        "{took:?}"
    );
}

#[test]
fn invalid_arguments_are_errors() {
    // Connections one after another: the NAA frees a slot once it has seen the client leave,
    // which may take a moment on a busy machine (the default limit is one slot per CPU).
    let naa = start_naa(SoftNaaConfig {
        max_connections: 4,
        ..SoftNaaConfig::default()
    });
    let opts = NaaOptions::at(naa.local_addr());
    for fncode in [0u32, 128, 256, 0x181] {
        let r = Naa::create_with(
            &SoftTransport::default(),
            fncode,
            vec![Param::zeroed(1)],
            vec![],
            &opts,
        );
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "fncode {fncode}: {r:?}"
        );
    }
    // No parameter at all: nothing to reply into.
    let r = Naa::create_with(&SoftTransport::default(), 1, vec![], vec![], &opts);
    assert!(
        matches!(r, Err(Error::Protocol(ProtocolError::NoParameterRegions))),
        "{r:?}"
    );
    let mut conn = Site::soft().connect(&naa, 1);
    assert!(conn.do_transfer().is_err(), "RPC before MRSP");
    let b = Buffer::zeroed(4);
    let id = conn.add_param(&b).unwrap();
    assert!(conn.set_bytes_to_send(id, Some(5)).is_err());
}
