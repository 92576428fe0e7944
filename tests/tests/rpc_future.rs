//! The RPC as a `Future` (`naaice::client::rpc_future`) on different executors: `pollster` (a minimal
//! `block_on`) and tokio's single-threaded runtime each run 8 RPCs on 8 software NAAs
//! concurrently on one thread, proven by kernels that meet at one rendezvous of 8; deadlines
//! and dropped futures.

use std::future::Future;
use std::task::Context;
use std::time::Duration;

use naaice::core::{Phase, ReturnCode};
use naaice::{Naa, Status};
use naaice_tests::join::join_all;
use naaice_tests::rendezvous::{self, Rendezvous};
use naaice_tests::suite::Site;
use naaice_tests::{SlowNaa, UNTIL_TIMEOUT};

const N: usize = 8;

fn check(statuses: &[naaice::Result<Status>]) {
    assert_eq!(statuses.len(), N);
    for (i, s) in statuses.iter().enumerate() {
        let s = s.as_ref().expect("RPC succeeded");
        assert_eq!(
            s.naa_error,
            ReturnCode::SUCCESS,
            "NAA {i}: the rendezvous was missed (RPCs serialised)"
        );
        assert_eq!(s.state, Phase::Finished);
    }
}

#[test]
fn pollster_runs_eight_rpcs_concurrently_on_one_thread() {
    let meet = Rendezvous::new(N);
    let fleet = rendezvous::fleet(&Site::soft(), N, &meet);
    let mut naas = rendezvous::handles(&Site::soft(), &fleet, 1024);
    for round in 1..=2u8 {
        let statuses = pollster::block_on(join_all(naas.iter_mut().map(Naa::call)));
        check(&statuses);
        for (i, naa) in naas.iter().enumerate() {
            let out = naa.output(0).expect("output");
            assert!(out.iter().all(|&b| b == i as u8 + round), "NAA {i} result");
        }
    }
}

/// One tokio task per handle, each running one RPC; their statuses in order.
fn call_in_tasks(rt: &tokio::runtime::Runtime, naas: Vec<Naa>) -> Vec<naaice::Result<Status>> {
    rt.block_on(async move {
        let tasks: Vec<_> = naas
            .into_iter()
            .map(|mut naa| tokio::spawn(async move { naa.call().await }))
            .collect();
        let mut statuses = Vec::new();
        for t in tasks {
            statuses.push(t.await.expect("task"));
        }
        statuses
    })
}

#[test]
fn tokio_current_thread_runs_eight_rpcs_concurrently() {
    let meet = Rendezvous::new(N);
    let fleet = rendezvous::fleet(&Site::soft(), N, &meet);
    let naas = rendezvous::handles(&Site::soft(), &fleet, 1024);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    let statuses = call_in_tasks(&rt, naas);
    check(&statuses);
}

#[test]
fn tokio_multi_thread_runs_sixteen_rpcs_on_sixteen_naas() {
    let meet = Rendezvous::new(16);
    let fleet = rendezvous::fleet(&Site::soft(), 16, &meet);
    let naas = rendezvous::handles(&Site::soft(), &fleet, 256);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio runtime");
    let statuses = call_in_tasks(&rt, naas);
    for (i, s) in statuses.iter().enumerate() {
        assert_eq!(
            s.as_ref().expect("RPC succeeded").naa_error,
            ReturnCode::SUCCESS,
            "NAA {i}"
        );
    }
}

#[test]
fn deadline_and_dropped_future() {
    // UNTIL_TIMEOUT's kernel runs until the NAA's kernel timeout, 1 s.
    let naa = SlowNaa::start();
    let create = |fncode: u32| naa.create(fncode);
    // The RPC's deadline ends the future with an error (the reactor wakes it in time).
    let mut late = create(u32::from(UNTIL_TIMEOUT));
    late.invoke_with_timeout(Duration::from_millis(50))
        .expect("invoke");
    let err = pollster::block_on(late.wait_async()).expect_err("deadline");
    assert!(err.to_string().contains("time"), "{err}");

    // A future dropped before completion leaves its RPC in flight; `wait` finishes it (the
    // kernel runs 1 s, past the NAA's kernel timeout).
    let mut naa1 = create(u32::from(UNTIL_TIMEOUT));
    {
        let mut fut = Box::pin(naa1.call());
        let waker = std::task::Waker::noop();
        assert!(
            fut.as_mut()
                .poll(&mut Context::from_waker(waker))
                .is_pending()
        );
    }
    assert!(
        naa1.is_busy(),
        "the dropped future's RPC is still in flight"
    );
    assert_eq!(
        naa1.wait().expect("wait").naa_error,
        ReturnCode::KERNEL_TIMEOUT
    );
    // wait_async on a handle whose RPC was reported returns its status at once.
    let again = pollster::block_on(naa1.wait_async()).expect("last status");
    assert_eq!(again.naa_error, ReturnCode::KERNEL_TIMEOUT);
}
