//! Many handles progressed together (`naaice::client::naa_set`): one thread keeps 8 software NAAs
//! busy at once, proven without timing by kernels that meet at one rendezvous of 8 (RPCs run
//! one after the other would miss it), and the semantics of inactive, finished and failed
//! handles.

use std::task::Poll;
use std::time::Duration;

use naaice::client::naa_set::{self, Finished};
use naaice::core::{Phase, ReturnCode};
use naaice_tests::rendezvous::{self, RENDEZVOUS_MISSED, Rendezvous};
use naaice_tests::suite::Site;
use naaice_tests::{SlowNaa, UNTIL_TIMEOUT};

const N: usize = 8;

#[test]
fn one_thread_runs_eight_naas_at_once_wait_all() {
    let meet = Rendezvous::new(N);
    let fleet = rendezvous::fleet(&Site::soft(), N, &meet);
    let mut naas = rendezvous::handles(&Site::soft(), &fleet, 4096);
    for round in 1..=3u8 {
        for naa in &mut naas {
            naa.invoke().expect("invoke");
        }
        let outcomes = naa_set::wait_all(&mut naas);
        assert_eq!(outcomes.len(), N);
        for (i, outcome) in outcomes.into_iter().enumerate() {
            let status = outcome.expect("in flight").expect("RPC succeeded");
            assert_eq!(
                status.naa_error,
                ReturnCode::SUCCESS,
                "NAA {i} round {round}: {:#x} means the rendezvous was missed (RPCs serialised)",
                RENDEZVOUS_MISSED
            );
            assert_eq!(status.state, Phase::Finished);
            let out = naas[i].output(0).expect("output");
            assert!(out.iter().all(|&b| b == i as u8 + round), "NAA {i} result");
        }
        // Everything was reported: nothing is in flight any more.
        assert!(naa_set::wait_any(&mut naas).is_none());
        assert!(
            naa_set::wait_all(&mut naas).iter().all(Option::is_none),
            "inactive handles give None"
        );
    }
}

#[test]
fn one_thread_runs_eight_naas_at_once_wait_any_and_test() {
    let meet = Rendezvous::new(N);
    let fleet = rendezvous::fleet(&Site::soft(), N, &meet);
    let mut naas = rendezvous::handles(&Site::soft(), &fleet, 64);
    for naa in &mut naas {
        naa.invoke().expect("invoke");
    }
    // The kernels wait for each other: nothing can have finished before all 8 started, and
    // test_all does not report (or consume) anything before all did.
    let mut seen = [false; N];
    loop {
        match naa_set::test_any(&mut naas) {
            Poll::Ready(Some(Finished { index, result })) => {
                let status = result.expect("RPC succeeded");
                assert_eq!(status.naa_error, ReturnCode::SUCCESS, "NAA {index}");
                assert!(!seen[index], "NAA {index} reported twice");
                seen[index] = true;
                break;
            }
            Poll::Ready(None) => panic!("handles in flight reported as inactive"),
            Poll::Pending => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    while let Some(Finished { index, result }) = naa_set::wait_any(&mut naas) {
        assert_eq!(
            result.expect("RPC succeeded").naa_error,
            ReturnCode::SUCCESS
        );
        assert!(!seen[index], "NAA {index} reported twice");
        seen[index] = true;
    }
    assert_eq!(
        seen, [true; N],
        "wait_any reports every RPC once, then None"
    );
    assert!(matches!(naa_set::test_any(&mut naas), Poll::Ready(None)));
}

#[test]
fn test_all_reports_nothing_until_all_finished() {
    let meet = Rendezvous::new(2);
    let fleet = rendezvous::fleet(&Site::soft(), 2, &meet);
    let mut naas = rendezvous::handles(&Site::soft(), &fleet, 16);
    // Only the first runs: its kernel waits for the second's, so test_all stays Pending.
    naas[0].invoke().expect("invoke");
    for _ in 0..20 {
        assert!(naa_set::test_all([&mut naas[0]]).is_pending());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(naas[0].is_busy(), "nothing reported by a pending test_all");
    naas[1].invoke().expect("invoke");
    let all = loop {
        if let Poll::Ready(all) = naa_set::test_all(&mut naas) {
            break all;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    for (i, outcome) in all.into_iter().enumerate() {
        let status = outcome.expect("in flight").expect("RPC succeeded");
        assert_eq!(status.naa_error, ReturnCode::SUCCESS, "NAA {i}");
    }
    assert!(naas.iter().all(|n| !n.is_busy()));
}

#[test]
fn never_invoked_handles_are_inactive_and_failures_are_per_handle() {
    // UNTIL_TIMEOUT's kernel runs until the NAA's kernel timeout, 1 s.
    let naa = SlowNaa::start();
    let create = |fncode: u32| naa.create(fncode);
    let mut idle = create(1);
    let mut ok = create(1);
    let mut late = create(u32::from(UNTIL_TIMEOUT));
    assert!(matches!(naa_set::test_any([&mut idle]), Poll::Ready(None)));
    assert!(naa_set::wait_any([&mut idle]).is_none());
    assert!(matches!(naa_set::test_all([&mut idle]), Poll::Ready(v) if v[0].is_none()));

    ok.invoke().expect("invoke");
    // A deadline shorter than the kernel fails this handle, and only this one.
    late.invoke_with_timeout(Duration::from_millis(50))
        .expect("invoke");
    let all = naa_set::wait_all([&mut idle, &mut ok, &mut late]);
    assert!(all[0].is_none(), "never invoked");
    let status = all[1].as_ref().expect("in flight").as_ref().expect("ok");
    assert_eq!(status.naa_error, ReturnCode::SUCCESS);
    let err = all[2]
        .as_ref()
        .expect("in flight")
        .as_ref()
        .expect_err("deadline");
    assert!(err.to_string().contains("time"), "{err}");
    assert_eq!(late.state(), Phase::Error);
    // A dead handle is never skipped by *_all, but reported once only by *_any.
    let again = naa_set::wait_all([&mut idle, &mut ok, &mut late]);
    assert!(again[0].is_none() && again[1].is_none());
    assert!(matches!(again[2], Some(Err(_))));
    assert!(naa_set::wait_any([&mut idle, &mut ok, &mut late]).is_none());
    // The healthy handle is reusable.
    ok.invoke().expect("invoke again");
    let done = naa_set::wait_any([&mut idle, &mut ok, &mut late]).expect("one in flight");
    assert_eq!(done.index, 1);
    assert!(done.result.is_ok());
}

#[test]
fn a_cancelled_handle_is_inactive_until_its_next_invoke() {
    // UNTIL_TIMEOUT's kernel runs until the NAA's kernel timeout, 1 s.
    let naa = SlowNaa::start();
    let create = |fncode: u32| naa.create(fncode);
    let mut slow = create(u32::from(UNTIL_TIMEOUT));
    let mut fast = create(1);
    slow.invoke().expect("invoke");
    assert!(slow.cancel(), "an RPC was in flight");
    // Cancelled: not in flight, not failed, skipped by every set call.
    assert!(naa_set::wait_any([&mut slow]).is_none());
    assert!(naa_set::wait_all([&mut slow])[0].is_none());
    // The next invoke reconnects; the handle takes part again.
    slow.invoke_with_timeout(Duration::from_secs(20))
        .expect("invoke after cancel reconnects");
    fast.invoke().expect("invoke");
    let all = naa_set::wait_all([&mut slow, &mut fast]);
    let slow_status = all[0].as_ref().expect("in flight").as_ref().expect("ok");
    assert_eq!(slow_status.naa_error, ReturnCode::KERNEL_TIMEOUT);
    let fast_status = all[1].as_ref().expect("in flight").as_ref().expect("ok");
    assert_eq!(fast_status.naa_error, ReturnCode::SUCCESS);
}

#[test]
fn a_handle_that_finishes_again_at_once_does_not_starve_the_others() {
    // Two connections at once, whatever the CPU count (the default limit is one per CPU).
    let naa = naaice_tests::start_naa(naaice::swnaa::SoftNaaConfig {
        max_connections: 2,
        ..naaice::swnaa::SoftNaaConfig::default()
    });
    let create = || {
        naaice::Naa::create_with(
            &naaice::transport::soft::SoftTransport::default(),
            1,
            vec![naaice::Param::zeroed(8)],
            vec![naaice::Param::zeroed(8)],
            &naaice::NaaOptions::at(naa.local_addr()),
        )
        .expect("create")
    };
    let mut naas = [create(), create()];
    let finished = |naas: &mut [naaice::Naa<_>]| match naa_set::test_any(naas) {
        Poll::Ready(Some(Finished { index, result })) => {
            result.expect("RPC succeeded");
            index
        }
        other => panic!("both RPCs had time to finish: {other:?}"),
    };
    for naa in &mut naas {
        naa.invoke().expect("invoke");
    }
    // Both finish long before the scan; the first scan reports the first handle.
    std::thread::sleep(Duration::from_millis(200));
    let first = finished(&mut naas);
    // Its next RPC finishes at once too: with both finished, the scan must now report the
    // other handle, not the one it reported last.
    naas[first].invoke().expect("invoke again");
    std::thread::sleep(Duration::from_millis(200));
    assert_ne!(finished(&mut naas), first, "the other handle was starved");
    assert_eq!(finished(&mut naas), first);
}
