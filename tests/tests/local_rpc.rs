//! End-to-end RPCs in local mode's in-process transport: the software NAA in this process,
//! its clients reaching it without sockets. The shared suite of `naaice_tests::suite` (every
//! error case included: MRSP errors, SOCKET_UNAVAIL, KERNEL_TIMEOUT, application codes,
//! kernel panics, the connection limit), plus what is particular to the in-process path:
//! in-place parameters are the NAA's regions (the kernel works on the caller's memory), and
//! `NAA_SPEC` local entries reach it in process or over the loopback.

use naaice::swnaa::SoftNaaConfig;
use naaice::{Buffer, Naa, NaaOptions, Param};
use naaice_tests::suite::{Site, pattern, plus};

// The shared bodies of `naaice_tests::suite`, each a test in process.
naaice_tests::suite_tests!(|_, body: fn(&Site)| body(&Site::local()));

naaice_tests::suite_scale_tests!(Site::local());

/// The kernel of an in-place parameter runs on the caller's memory: the answer is in the
/// caller's buffer without a copy back, and the NAA holds no memory of its own for it; an
/// input-only and an output-only parameter still get the NAA's own memory (copied once).
#[test]
fn in_place_parameters_are_the_callers_memory() {
    let site = Site::local();
    // Two connections one after another: the NAA frees a slot once it has seen the client
    // leave, which may take a moment on a busy machine (the default is one slot per CPU).
    let naa = site.start_naa(SoftNaaConfig {
        max_connections: 2,
        ..SoftNaaConfig::default()
    });
    let shared = Param::from_vec(pattern(4096, 1));
    let mut handle = site.create(&naa, 1, vec![shared.clone()], vec![shared.clone()]);
    for round in 1..=3u8 {
        handle.invoke().unwrap();
        handle.wait().unwrap();
        assert_eq!(shared.buffer().to_vec(), plus(&pattern(4096, 1), round));
    }
    drop(handle);

    // Separate input and output (kernel 1 adds 1 to every region): the NAA's own memory for
    // each, so the caller's input is unchanged and the output is the NAA's zeroed region + 1.
    let input = Param::from_vec(pattern(1000, 5));
    let output = Param::from_vec(vec![0; 1000]);
    let mut handle = site.create(&naa, 1, vec![input.clone()], vec![output.clone()]);
    handle.invoke().unwrap();
    handle.wait().unwrap();
    assert_eq!(input.buffer().to_vec(), pattern(1000, 5));
    assert_eq!(output.buffer().to_vec(), vec![1; 1000]);
}

/// Memory the program owns (a C or NumPy array, `Buffer::from_raw_parts`) is not shared with
/// the in-process NAA: the kernel works on the NAA's copy (in and out), so that a cancel or a
/// timeout hands the memory back at once; the answer is the same.
#[test]
fn the_programs_own_memory_is_copied_not_shared() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use naaice::core::{FunctionCode, ReturnCode};
    use naaice::swnaa::{KernelContext, KernelRegistry};

    let seen = Arc::new(AtomicUsize::new(0));
    let mut kernels = KernelRegistry::builtin();
    let s = Arc::clone(&seen);
    kernels.register(
        FunctionCode::new(30).unwrap(),
        move |ctx: &mut KernelContext<'_, '_>| {
            if let Some(p) = ctx.param(0) {
                s.store(p.as_ptr() as usize, Ordering::Relaxed);
                p.iter_mut().for_each(|b| *b = b.wrapping_add(2));
            }
            ReturnCode::SUCCESS
        },
    );
    let site = Site::local();
    let naa = site.start_naa_with(SoftNaaConfig::default(), kernels);
    let mut storage = pattern(512, 3);
    let addr = storage.as_ptr() as usize;
    // SAFETY: `storage` outlives the handle and is not touched while the handle lives.
    let buffer = unsafe {
        Buffer::from_raw_parts(std::ptr::NonNull::new(storage.as_mut_ptr()).unwrap(), 512)
    };
    let p = Param::new(buffer);
    let mut handle = site.create(&naa, 30, vec![p.clone()], vec![p.clone()]);
    handle.invoke().unwrap();
    handle.wait().unwrap();
    assert_ne!(seen.load(Ordering::Relaxed), 0);
    assert_ne!(
        seen.load(Ordering::Relaxed),
        addr,
        "the kernel ran on the program's memory"
    );
    drop(handle);
    drop(p);
    assert_eq!(storage, plus(&pattern(512, 3), 2));
}

/// `NaaOptions::local` reaches the in-process NAA in process, `local_over_soft` the loopback
/// one; both give the same answers.
#[test]
fn local_options_reach_both_in_process_naas() {
    for options in [
        NaaOptions::local().unwrap(),
        NaaOptions::local_over_soft().unwrap(),
    ] {
        let p = Param::from_vec(pattern(300, 7));
        let mut handle = Naa::create_with(
            &site_transport(),
            1,
            vec![p.clone()],
            vec![p.clone()],
            &options,
        )
        .unwrap();
        handle.invoke().unwrap();
        handle.wait().unwrap();
        assert_eq!(p.buffer().to_vec(), plus(&pattern(300, 7), 1));
    }
    assert!(naaice::transport::local::is_listening(
        NaaOptions::local().unwrap().remote.unwrap()
    ));
    assert!(!naaice::transport::local::is_listening(
        NaaOptions::local_over_soft().unwrap().remote.unwrap()
    ));
}

fn site_transport() -> naaice::transport::AnyTransport {
    Site::local().transport
}

/// Eight in-process NAAs kept busy by one thread (`wait_all`, then `wait_any`), proven by
/// kernels that meet at one rendezvous of eight.
#[test]
fn one_thread_runs_eight_in_process_naas_at_once() {
    use naaice::client::naa_set;
    use naaice_tests::rendezvous::{self, Rendezvous};
    let site = Site::local();
    let meet = Rendezvous::new(8);
    let fleet = rendezvous::fleet(&site, 8, &meet);
    let mut naas = rendezvous::handles(&site, &fleet, 4096);
    for round in 1..=2u8 {
        for naa in &mut naas {
            naa.invoke().unwrap();
        }
        for (i, outcome) in naa_set::wait_all(&mut naas).into_iter().enumerate() {
            let status = outcome.expect("in flight").expect("RPC succeeded");
            assert!(
                status.naa_error.is_success(),
                "NAA {i}: {:?}",
                status.naa_error
            );
            assert!(
                naas[i]
                    .output(0)
                    .unwrap()
                    .iter()
                    .all(|&b| b == i as u8 + round)
            );
        }
    }
    for naa in &mut naas {
        naa.invoke().unwrap();
    }
    let mut seen = 0;
    while let Some(finished) = naa_set::wait_any(&mut naas) {
        assert!(finished.result.unwrap().naa_error.is_success());
        seen += 1;
    }
    assert_eq!(seen, 8);
}

/// The RPC as a future: eight in-process RPCs at once on one thread.
#[test]
fn futures_run_eight_in_process_rpcs_on_one_thread() {
    use naaice_tests::join::join_all;
    use naaice_tests::rendezvous::{self, Rendezvous};
    let site = Site::local();
    let meet = Rendezvous::new(8);
    let fleet = rendezvous::fleet(&site, 8, &meet);
    let mut naas = rendezvous::handles(&site, &fleet, 1024);
    let statuses = pollster::block_on(join_all(naas.iter_mut().map(Naa::call)));
    for s in statuses {
        assert!(s.unwrap().naa_error.is_success());
    }
}

/// Cancel while an in-process kernel blocks on an in-place region (the caller's memory):
/// returns at once; the kernel's writes are undone when it returns (its client left), so the
/// caller finds its input as on a remote NAA; the handle works again on a new connection.
#[test]
fn cancel_an_in_process_kernel_and_reuse_the_handle() {
    use std::sync::{Arc, Condvar, Mutex};

    use naaice::core::{FunctionCode, ReturnCode};
    use naaice::swnaa::{KernelContext, KernelRegistry};

    const BLOCK: u8 = 9;
    let gate = Arc::new((Mutex::new((0u32, false)), Condvar::new()));
    let mut kernels = KernelRegistry::builtin();
    let g = Arc::clone(&gate);
    kernels.register(
        FunctionCode::new(BLOCK).unwrap(),
        move |ctx: &mut KernelContext<'_, '_>| {
            if let Some(p) = ctx.param(0) {
                p.fill(0xEE);
            }
            let (lock, cv) = &*g;
            let mut st = lock.lock().unwrap();
            st.0 += 1;
            cv.notify_all();
            while !st.1 {
                st = cv.wait(st).unwrap();
            }
            ReturnCode::SUCCESS
        },
    );
    let site = Site::local();
    let naa = site.start_naa_with(
        SoftNaaConfig {
            max_connections: 4,
            ..SoftNaaConfig::default()
        },
        kernels,
    );
    let p = Param::from_vec((0..64).collect());
    let mut h = site.create(&naa, u32::from(BLOCK), vec![p.clone()], vec![p.clone()]);
    h.invoke().unwrap();
    {
        let (lock, cv) = &*gate;
        let st = lock.lock().unwrap();
        let _started = cv.wait_while(st, |s| s.0 == 0).unwrap();
    }
    assert!(h.cancel());
    assert!(matches!(h.wait(), Err(naaice::Error::Cancelled)));
    // The blocked kernel wrote on the caller's memory (an in-place region); it holds that
    // memory until it returns, and it leaves it as it was since its client left: reading
    // the buffer waits for it, and finds the input.
    {
        let (lock, cv) = &*gate;
        lock.lock().unwrap().1 = true;
        cv.notify_all();
    }
    assert_eq!(
        p.buffer().to_vec(),
        (0..64).collect::<Vec<u8>>(),
        "input unchanged"
    );
    h.invoke_with(&naaice::Call::new().function(1).unwrap())
        .unwrap();
    let st = h.wait().unwrap();
    assert!(st.naa_error.is_success());
    assert_eq!(p.buffer().to_vec(), (1..65).collect::<Vec<u8>>());
    drop(h);
    naa.shutdown();
}

/// A pipeline on local mode: every lane reaches the in-process NAA, every byte comes back.
#[test]
fn a_pipeline_runs_on_the_in_process_naa() {
    let chunk = 64 << 10;
    let mut p = naaice::Pipeline::create_with(
        &site_transport(),
        1,
        chunk,
        3,
        &NaaOptions::local().unwrap(),
    )
    .unwrap();
    let input = pattern(5 * chunk + 123, 4);
    let mut data = input.clone();
    p.run(&mut data).unwrap();
    assert_eq!(data, plus(&input, 1));
}

/// A program built on the software transport alone (`Naa<SoftEndpoint>`) cannot hold an
/// in-process endpoint: its local handles reach the loopback in-process NAA instead, with
/// the same answers.
#[test]
fn a_software_transport_handle_reaches_the_loopback_naa() {
    let p = Param::from_vec(pattern(100, 2));
    let mut h = Naa::create_with(
        &naaice::transport::soft::SoftTransport::default(),
        2,
        vec![p.clone()],
        vec![p.clone()],
        &NaaOptions::local().unwrap(),
    )
    .unwrap();
    h.invoke().unwrap();
    h.wait().unwrap();
    assert_eq!(p.buffer().to_vec(), plus(&pattern(100, 2), 2));
}

/// Two buffers over overlapping memory (the program's own, registered twice): a WRITE from
/// one into the other copies through a temporary, as memmove does, never through two views
/// of the same bytes at once.
#[test]
fn a_write_between_overlapping_foreign_buffers_moves_like_memmove() {
    use std::time::{Duration, Instant};

    use naaice::transport::local::LocalTransport;
    use naaice::transport::{
        Completion, Endpoint, Incoming, Listener, MemoryRegion, SendOp, SendWr, Sge, Transport,
        WcStatus,
    };

    let soon = || Instant::now() + Duration::from_secs(5);
    let mut listener = LocalTransport.listen(LocalTransport::any()).unwrap();
    let addr = listener.local_addr();
    let server = std::thread::spawn(move || {
        listener
            .next_request(soon())
            .unwrap()
            .unwrap()
            .accept()
            .unwrap()
    });
    let mut c = LocalTransport.connect(addr, None, soon()).unwrap();
    let mut s = server.join().unwrap();
    let mut storage: Vec<u8> = (0..96).collect();
    let base = storage.as_mut_ptr();
    // SAFETY: `storage` outlives both buffers, and only the transport touches it while they
    // live (the two views overlap in bytes 32..64, which is what this test is about).
    let (low, high) = unsafe {
        (
            Buffer::from_raw_parts(std::ptr::NonNull::new(base).unwrap(), 64),
            Buffer::from_raw_parts(std::ptr::NonNull::new(base.add(32)).unwrap(), 64),
        )
    };
    let src = c.register(&low).unwrap();
    let dst = s.register(&high).unwrap();
    c.post_send(&[SendWr {
        wr_id: 1,
        op: SendOp::write(dst.addr(), dst.rkey(), None),
        local: Some(Sge {
            addr: src.addr(),
            len: 64,
            lkey: src.lkey(),
        }),
        solicited: false,
    }])
    .unwrap();
    let mut out = [Completion::BLANK];
    let deadline = soon();
    while c.poll(&mut out).unwrap() == 0 {
        assert!(Instant::now() < deadline, "no completion");
        std::thread::yield_now();
    }
    assert_eq!(out[0].status, WcStatus::Success);
    drop((src, dst, c, s, low, high));
    let mut expected: Vec<u8> = (0..96).collect();
    expected.copy_within(0..64, 32);
    assert_eq!(storage, expected);
}
