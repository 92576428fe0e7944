//! Test bodies shared by the end-to-end suites of every transport (`tests/rpc.rs` over the
//! software transport, `tests/verbs_rpc.rs` over verbs): each takes a [`Site`] (a transport
//! and the address to serve on), so the same checks run on both.

use std::time::{Duration, Instant};

use naaice::core::machine::Error as ProtocolError;
use naaice::core::{MrspErrorCode, Phase};
use naaice::swnaa::{KERNEL_FAILED, SoftNaaConfig};
use naaice::transport::TransportError;
use naaice::{Buffer, Connection, Error, Naa, NaaOptions, Param};
use naaice_core::ReturnCode;

pub use crate::site::{Site, pattern};
use crate::{APP_ERROR, PANIC, PROBE, SLEEP, UNTIL_TIMEOUT};

/// A configuration for tests that hold several connections at once, or leave a kernel
/// running behind them (which keeps its slot): more slots than the default (one per core).
fn roomy() -> SoftNaaConfig {
    SoftNaaConfig {
        max_connections: 64,
        ..SoftNaaConfig::default()
    }
}

/// Declares one `#[test]` per body of this module that needs nothing but a [`Site`], each
/// running `$run(name, body)` (`body: fn(&Site)`): a suite chooses its transport and limits
/// in `$run`, and gets every shared test. With `ignore = "reason", $run` every test is
/// `#[ignore = "reason"]` (a suite that needs hardware the machine may not have).
#[macro_export]
macro_rules! suite_tests {
    (ignore = $reason:literal, $run:expr) => {
        $crate::suite_tests!(@list [#[ignore = $reason]] $run);
    };
    ($run:expr) => {
        $crate::suite_tests!(@list [] $run);
    };
    (@list $attrs:tt $run:expr) => {
        $crate::suite_tests!(@each $attrs $run;
            separate_inputs_and_outputs,
            single_send_internal_regions_and_user_bytes,
            zero_outputs_and_single_send_only_inputs,
            over_the_connection_limit_is_rejected_with_the_reason,
            a_client_that_reconnects_at_once_is_served,
            unknown_function_code_gets_socket_unavail,
            kernel_timeout_keeps_the_connection,
            application_error_and_kernel_panic,
            mrsp_errors_reach_the_client,
            poll_and_test_never_block,
            many_naas_overlap_from_one_thread,
        );
    };
    (@each $attrs:tt $run:expr; $($name:ident),+ $(,)?) => {
        $( $crate::suite_tests!(@one $attrs $run; $name); )+
    };
    (@one [$($attr:tt)*] $run:expr; $name:ident) => {
        #[test]
        $($attr)*
        fn $name() {
            ($run)(stringify!($name), $crate::suite::$name);
        }
    };
}

/// Declares the four tests of scale on one machine (`$site`: an expression giving a
/// [`Site`]): 1 to 32 in-place regions, sizes from 1 B to 64 MiB, 1000 RPCs on one
/// connection and 16 concurrent clients (the verbs suite, in an emulated VM, runs smaller
/// ones of its own).
#[macro_export]
macro_rules! suite_scale_tests {
    ($site:expr) => {
        #[test]
        fn one_to_thirty_two_in_place_regions() {
            $crate::suite::in_place_regions(&$site, &[1, 2, 7, 31, 32]);
        }

        #[test]
        fn sizes_from_one_byte_to_64_mib() {
            let sizes = [
                1,
                2,
                3,
                4095,
                4096,
                4097,
                65_536,
                1 << 20,
                5_000_001,
                64 << 20,
            ];
            $crate::suite::in_place_sizes(&$site, &sizes);
        }

        #[test]
        fn thousand_rpcs_on_one_connection() {
            $crate::suite::repeated_rpcs(&$site, 1000);
        }

        #[test]
        fn sixteen_concurrent_clients() {
            $crate::suite::concurrent_clients(&$site, 16, 50, 4096);
        }
    };
}

/// `data` with `n` added to every byte (what kernels 1 and 2 compute).
pub fn plus(data: &[u8], n: u8) -> Vec<u8> {
    data.iter().map(|b| b.wrapping_add(n)).collect()
}

/// One RPC with kernel 1 over `n` in-place regions of different sizes, for each `n` of
/// `counts`, on a fresh connection each.
pub fn in_place_regions(site: &Site, counts: &[usize]) {
    let naa = site.start_naa(roomy());
    for &n in counts {
        let mut conn = site.connect(&naa, 1);
        let data: Vec<Vec<u8>> = (0..n).map(|i| pattern(100 + i * 37, i as u8)).collect();
        let buffers: Vec<Buffer> = data.iter().map(|d| Buffer::from_slice(d)).collect();
        for b in &buffers {
            let id = conn.add_param(b).unwrap();
            conn.set_input(id).unwrap();
            conn.set_output(id).unwrap();
        }
        conn.do_mrsp().unwrap();
        let r = conn.do_transfer().unwrap();
        assert!(r.status.is_success());
        assert_eq!(
            r.bytes_received as usize,
            data[n - 1].len(),
            "last output's length"
        );
        for (b, d) in buffers.iter().zip(&data) {
            assert_eq!(b.to_vec(), plus(d, 1), "{n} regions");
        }
        conn.disconnect();
    }
}

/// One RPC with kernel 2 over one in-place region of each of `sizes`, on a fresh connection
/// each.
pub fn in_place_sizes(site: &Site, sizes: &[usize]) {
    let naa = site.start_naa(roomy());
    for &size in sizes {
        let mut conn = site.connect(&naa, 2);
        let data = pattern(size, size as u8);
        let buf = Buffer::from_slice(&data);
        let id = conn.add_param(&buf).unwrap();
        conn.set_input(id).unwrap();
        conn.set_output(id).unwrap();
        conn.do_mrsp().unwrap();
        let r = conn.do_transfer().unwrap();
        assert_eq!(
            (r.status, r.bytes_received as usize),
            (ReturnCode::SUCCESS, size)
        );
        assert!(
            buf.to_vec() == plus(&data, 2),
            "content of the {size}-byte region"
        );
        conn.disconnect();
    }
}

/// Two inputs and one output of different sizes, three RPCs with kernel 1: the output starts
/// zeroed and gains 1 per RPC.
pub fn separate_inputs_and_outputs(site: &Site) {
    let naa = site.start_naa(SoftNaaConfig::default());
    let conn = &mut site.connect(&naa, 1);
    let (a, b) = (
        Buffer::from_slice(&pattern(3000, 1)),
        Buffer::from_slice(&pattern(10, 2)),
    );
    let out = Buffer::zeroed(777);
    for (buf, input) in [(&a, true), (&b, true), (&out, false)] {
        let id = conn.add_param(buf).unwrap();
        if input {
            conn.set_input(id).unwrap()
        } else {
            conn.set_output(id).unwrap()
        }
    }
    conn.do_mrsp().unwrap();
    for rpc in 1..=3u8 {
        let r = conn.do_transfer().unwrap();
        assert_eq!(r.bytes_received, 777);
        assert_eq!(out.to_vec(), vec![rpc; 777]);
    }
}

/// `clients` AP2 clients at once against one NAA (as many connection slots), each running
/// `rpcs` RPCs with kernel 1 on its own in-place region of `len + 100 · client` bytes and
/// checking the result.
pub fn concurrent_clients(site: &Site, clients: u8, rpcs: u8, len: usize) {
    let naa = site.start_naa(SoftNaaConfig {
        max_connections: usize::from(clients),
        ..SoftNaaConfig::default()
    });
    let options = NaaOptions {
        rpc_timeout: Duration::from_secs(120),
        ..site.options(&naa)
    };
    let threads: Vec<_> = (0..clients)
        .map(|t| {
            let (transport, options) = (site.transport.clone(), options.clone());
            std::thread::spawn(move || {
                let p = Param::from_vec(pattern(len + usize::from(t) * 100, t));
                let mut h = Naa::create_with(&transport, 1, vec![p.clone()], vec![p], &options)?;
                let start = h.input(0)?.to_vec();
                for _ in 0..rpcs {
                    h.invoke()?;
                    assert!(h.wait()?.naa_error.is_success());
                }
                assert_eq!(h.output(0)?.to_vec(), plus(&start, rpcs));
                h.finalize();
                Ok::<_, Error>(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread").expect("client RPCs");
    }
}

/// Kernel timeout 100 ms: a kernel that sleeps 300 ms is answered with KERNEL_TIMEOUT and no
/// output; the next RPC follows at once and succeeds (the late kernel's regions are never in
/// the way), and so do more. A kernel that watches its deadline stops there, and its RPC is
/// answered with KERNEL_TIMEOUT without the outputs it computed.
pub fn kernel_timeout_keeps_the_connection(site: &Site) {
    let naa = site.start_naa(SoftNaaConfig {
        kernel_timeout: Duration::from_millis(100),
        ..roomy()
    });
    kernel_timeout_then_next_rpc(&mut site.connect(&naa, SLEEP));
    kernel_timeout_seen_by_the_kernel(&mut site.connect(&naa, UNTIL_TIMEOUT));
}

fn kernel_timeout_then_next_rpc(conn: &mut Connection) {
    let buf = Buffer::from_slice(&pattern(16, 9));
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.set_output(id).unwrap();
    conn.do_mrsp().unwrap();
    for _ in 0..2 {
        conn.set_immediate([30, 0, 0]).unwrap(); // the kernel sleeps 300 ms
        let r = conn.do_transfer().unwrap();
        assert_eq!(
            (r.status, r.bytes_received),
            (ReturnCode::KERNEL_TIMEOUT, 0)
        );
        conn.set_immediate([0, 0, 0]).unwrap();
        let r = conn
            .do_transfer()
            .expect("the RPC right after a kernel timeout");
        assert_eq!(r.status, ReturnCode::SUCCESS);
        assert!(conn.is_connected());
    }
}

fn kernel_timeout_seen_by_the_kernel(conn: &mut Connection) {
    let data = pattern(64, 3);
    let buf = Buffer::from_slice(&data);
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.set_output(id).unwrap();
    conn.do_mrsp().unwrap();
    for _ in 0..2 {
        let r = conn.do_transfer().unwrap();
        assert_eq!(
            (r.status, r.bytes_received),
            (ReturnCode::KERNEL_TIMEOUT, 0)
        );
        assert_eq!(buf.to_vec(), data, "no outputs after a kernel timeout");
    }
}

/// Three parameters (single-send, in-place, output), an internal region, an address offset and
/// user bytes, three RPCs with the PROBE kernel: the internal region keeps its count, the
/// single-send input is the one of RPC 1, the in-place region is written every RPC.
pub fn single_send_internal_regions_and_user_bytes(site: &Site) {
    let naa = site.start_naa(SoftNaaConfig::default());
    let mut conn = site.connect(&naa, PROBE);
    let p0 = Buffer::from_slice(&[7; 64]);
    let p1 = Buffer::from_slice(&pattern(1000, 5));
    let p2 = Buffer::zeroed(256);
    let (i0, i1, i2) = (
        conn.add_param(&p0).unwrap(),
        conn.add_param(&p1).unwrap(),
        conn.add_param(&p2).unwrap(),
    );
    conn.set_single_send(i0).unwrap();
    conn.set_input(i1).unwrap();
    conn.set_output(i1).unwrap();
    conn.set_output(i2).unwrap();
    conn.add_internal(8192).unwrap();
    conn.set_addr_offset(0x1000_0000).unwrap();
    conn.set_immediate([0x11, 0x22, 0x33]).unwrap();
    conn.do_mrsp().unwrap();
    let original = p1.to_vec();
    for rpc in 1..=3u8 {
        let r = conn.do_transfer().unwrap();
        assert_eq!(r.bytes_received, 256);
        let out = p2.to_vec();
        assert_eq!(out[0], rpc, "internal region keeps its count across RPCs");
        assert_eq!(out[1], 7, "single-send input is the one sent in RPC 1");
        assert_eq!(p1.to_vec(), plus(&original, rpc), "in-place region");
        // Changing the single-send input after RPC 1 must not reach the NAA.
        p0.lock().fill(9);
    }
    // The user bytes cannot change while an RPC is in flight.
    conn.init_transfer().unwrap();
    assert!(matches!(
        conn.set_immediate([1, 2, 3]),
        Err(Error::Protocol(ProtocolError::WrongPhase { .. }))
    ));
    conn.wait().unwrap();
}

/// No output at all (the NAA answers with a zero-length write) and an input sent only in the
/// first RPC (RPCs 2 and 3 send nothing but the zero-length WRITE WITH IMM, D-08).
pub fn zero_outputs_and_single_send_only_inputs(site: &Site) {
    let naa = site.start_naa(SoftNaaConfig::default());
    let mut conn = site.connect(&naa, 1);
    let input = Buffer::from_slice(&[1; 100]);
    let id = conn.add_param(&input).unwrap();
    conn.set_single_send(id).unwrap();
    conn.do_mrsp().unwrap();
    for _ in 0..3 {
        let r = conn.do_transfer().unwrap();
        assert_eq!((r.status, r.bytes_received), (ReturnCode::SUCCESS, 0));
    }
    assert_eq!(conn.rpc_count(), 3);
}

/// `rpcs` RPCs with kernel 1 on one AP2 handle.
pub fn repeated_rpcs(site: &Site, rpcs: u32) {
    let naa = site.start_naa(SoftNaaConfig::default());
    let mut h = site.in_place(&naa, 1, 64);
    let before = h.input(0).unwrap().to_vec();
    for _ in 0..rpcs {
        h.invoke().unwrap();
        let s = h.wait().unwrap();
        assert_eq!(
            (s.state, s.naa_error, s.bytes_received),
            (Phase::Finished, ReturnCode::SUCCESS, 64)
        );
    }
    assert_eq!(h.output(0).unwrap().to_vec(), plus(&before, rpcs as u8));
    h.finalize();
}

/// A function code without a kernel: every RPC is answered with SOCKET_UNAVAIL, no output is
/// written, and the connection survives.
pub fn unknown_function_code_gets_socket_unavail(site: &Site) {
    let naa = site.start_naa(SoftNaaConfig::default());
    let mut h = site.in_place(&naa, 99, 128);
    let before = h.input(0).unwrap().to_vec();
    for _ in 0..3 {
        h.invoke().unwrap();
        let s = h.wait().unwrap();
        assert_eq!(
            (s.naa_error, s.bytes_received),
            (ReturnCode::SOCKET_UNAVAIL, 0)
        );
        assert_eq!(s.naa_error.naa_error(), 0x01);
    }
    assert_eq!(h.output(0).unwrap().to_vec(), before, "no output on error");
}

/// An application return code arrives with the outputs; a panicking kernel is reported as
/// [`KERNEL_FAILED`] and the NAA keeps serving.
pub fn application_error_and_kernel_panic(site: &Site) {
    let naa = site.start_naa(roomy());
    let mut h = site.in_place(&naa, u32::from(APP_ERROR), 32);
    let before = h.input(0).unwrap().to_vec();
    h.invoke().unwrap();
    let s = h.wait().unwrap();
    assert_eq!(s.naa_error.get(), 0x42);
    assert_eq!(
        s.naa_error.class(),
        naaice::core::wire::ReturnClass::Application
    );
    assert_eq!(h.output(0).unwrap().to_vec(), plus(&before, 1));
    let mut p = site.in_place(&naa, u32::from(PANIC), 8);
    p.invoke().unwrap();
    assert_eq!(p.wait().unwrap().naa_error, KERNEL_FAILED);
    let mut other = site.in_place(&naa, 1, 8);
    other.invoke().unwrap();
    assert!(other.wait().unwrap().naa_error.is_success());
}

/// MRSP requests over the NAA's region and memory limits are refused with the matching code;
/// within the limits the same NAA accepts.
pub fn mrsp_errors_reach_the_client(site: &Site) {
    let naa = site.start_naa(SoftNaaConfig {
        max_regions: 4,
        max_bytes_per_connection: 1 << 20,
        // Three connections one after another (a refused MRSP ends its connection).
        ..roomy()
    });
    let opts = NaaOptions::at(naa.local_addr());
    let params = |n: usize, len: usize| (0..n).map(|_| Param::zeroed(len)).collect::<Vec<_>>();
    let cases = [
        (params(5, 8), MrspErrorCode::TooManyRegions),
        (params(2, 600 << 10), MrspErrorCode::NotEnoughMemory),
    ];
    for (inputs, code) in cases {
        match Naa::create_with(&site.transport, 1, inputs, vec![], &opts) {
            Err(Error::Protocol(ProtocolError::MrspRejected(c))) => assert_eq!(c, code),
            other => panic!("expected MRSP error {code:?}, got {other:?}"),
        }
    }
    Naa::create_with(&site.transport, 1, params(4, 8), vec![], &opts).unwrap();
}

/// With one connection slot, a second client is rejected with the reason; the slot returns
/// when the first client leaves.
pub fn over_the_connection_limit_is_rejected_with_the_reason(site: &Site) {
    let naa = site.start_naa(SoftNaaConfig {
        max_connections: 1,
        ..SoftNaaConfig::default()
    });
    let first = site.connect(&naa, 1);
    match site.try_connect(&naa, 1) {
        Err(Error::Transport(TransportError::Rejected(reason))) => {
            assert!(reason.contains("overloaded"), "{reason}")
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    // The slot is free as soon as the client has left, whether or not the NAA's worker has
    // seen it yet: the next connection is served at once.
    drop(first);
    site.connect(&naa, 1);
}

/// A client that finalizes its handle and creates the next one at once, 20 times, is served
/// every time by an NAA with one slot: the slot of a connection whose client left is free
/// before the NAA's worker has seen the end (on a busy node it may not have run since).
pub fn a_client_that_reconnects_at_once_is_served(site: &Site) {
    let naa = site.start_naa(SoftNaaConfig {
        max_connections: 1,
        evict_idle_after: None,
        ..SoftNaaConfig::default()
    });
    for round in 0..20 {
        let mut h = site.in_place(&naa, 1, 64);
        h.invoke().unwrap_or_else(|e| panic!("round {round}: {e}"));
        let status = h.wait().unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(status.naa_error.is_success(), "round {round}: {status:?}");
        h.finalize();
    }
}

/// AP1 `poll` and AP2 `test` never block: while a 1 s kernel runs, `poll` keeps returning
/// "not yet"; `test` until done, then `wait` gives the same status. While the RPC is in flight
/// the handle's buffers are inaccessible.
pub fn poll_and_test_never_block(site: &Site) {
    let naa = site.start_naa(roomy());
    let mut conn = site.connect(&naa, SLEEP);
    let buf = Buffer::zeroed(64);
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.set_output(id).unwrap();
    conn.do_mrsp().unwrap();
    conn.set_immediate([100, 0, 0]).unwrap();
    conn.init_transfer().unwrap();
    let started = Instant::now();
    let mut polls = 0;
    while started.elapsed() < Duration::from_millis(300) {
        assert!(conn.poll().unwrap().is_none(), "finished before the kernel");
        polls += 1;
    }
    assert!(polls > 1, "poll() returned only {polls} time(s) in 300 ms");
    assert!(conn.wait().unwrap().status.is_success());
    let mut h = site.in_place(&naa, 1, 64);
    h.invoke().unwrap();
    assert!(matches!(h.input(0), Err(Error::Busy)));
    assert!(matches!(h.output(0), Err(Error::Busy)));
    assert!(matches!(h.invoke(), Err(Error::Busy)));
    let status = loop {
        if let Some(s) = h.test().unwrap() {
            break s;
        }
    };
    assert!(status.naa_error.is_success());
    assert_eq!(
        h.wait().unwrap(),
        status,
        "wait after test: the same status"
    );
    assert!(h.output(0).is_ok());
    assert!(matches!(h.input(5), Err(Error::InvalidArgument(_))));
}

/// One thread keeps 4 NAAs busy through `naa_set::wait_all` and through futures joined on one
/// thread: their kernels meet at one rendezvous, which serialised RPCs would miss. Both wait
/// through the transport's readiness descriptors (`Endpoint::ready_fd`).
pub fn many_naas_overlap_from_one_thread(site: &Site) {
    use crate::rendezvous::{self, Rendezvous};
    const N: usize = 4;
    let meet = Rendezvous::new(N);
    let fleet = rendezvous::fleet(site, N, &meet);
    let mut naas = rendezvous::handles(site, &fleet, 4096);
    for naa in &mut naas {
        naa.invoke().expect("invoke");
    }
    for (i, outcome) in naaice::client::naa_set::wait_all(&mut naas)
        .into_iter()
        .enumerate()
    {
        let status = outcome.expect("in flight").expect("RPC succeeded");
        assert_eq!(
            status.naa_error,
            ReturnCode::SUCCESS,
            "NAA {i} missed the rendezvous"
        );
    }
    let calls = naas.iter_mut().map(Naa::call);
    for (i, status) in pollster::block_on(crate::join::join_all(calls))
        .into_iter()
        .enumerate()
    {
        let status = status.expect("RPC succeeded");
        assert_eq!(
            status.naa_error,
            ReturnCode::SUCCESS,
            "NAA {i} missed the rendezvous"
        );
    }
    for (i, naa) in naas.iter().enumerate() {
        let out = naa.output(0).expect("output");
        assert!(out.iter().all(|&b| b == i as u8 + 2), "NAA {i} result");
    }
}
