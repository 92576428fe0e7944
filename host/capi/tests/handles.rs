//! Through the C functions, called from Rust: `naa_finalize`,
//! `naaice_disconnect_and_cleanup` and `naa_swnaa_destroy` free everything (no handle or
//! context left in the tables, every library thread joined), also after failed calls and when
//! called twice.

use std::ffi::c_void;
use std::ptr;

use naaice_ap2::ap1::*;
use naaice_ap2::ap2::*;
use naaice_ap2::swnaa::*;
use naaice_ap2::*;

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Threads of this process once those that were joined have left `/proc`: a thread's join
/// returns when it has released its memory, a moment before the kernel removes the thread
/// (on a busy machine, later still). Waits up to 10 s for `expected`; a thread still running
/// then was not joined.
fn threads_settled(expected: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let n = threads();
        if n <= expected || std::time::Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn param(buf: &mut [u8]) -> naa_param_t {
    naa_param_t {
        addr: buf.as_mut_ptr().cast::<c_void>(),
        size: buf.len(),
        single_send: CBool(0),
    }
}

#[test]
fn finalize_and_destroy_free_everything() {
    // SAFETY: the only test in this binary, and no other thread exists yet.
    unsafe { std::env::set_var("NAAICE_TRANSPORT", "soft") };
    let baseline = threads();
    let naa = naa_swnaa_new();
    assert!(!naa.is_null());
    // SAFETY: a NUL-terminated literal.
    assert_eq!(unsafe { naa_swnaa_start(naa, c"127.0.0.1".as_ptr(), 0) }, 0);
    let port = naa_swnaa_port(naa);
    assert!(port > 0);
    assert_eq!(live_servers(), 1);
    // SAFETY: the only test in this binary; the server's threads never read the environment
    // (NAA_SPEC is read by the first naa_create, below).
    unsafe { std::env::set_var("NAA_SPEC", format!("127.0.0.1:{port}:1:1")) };

    let mut x = vec![7u8; 4096];
    let mut p = [param(&mut x)];
    let mut h = naa_handle {
        function_code: 0,
        comm_ctx: ptr::null_mut(),
    };
    let mut st = naa_status::in_state(naaice_communication_state::INIT);
    // SAFETY (all calls below): pointers to live locals; `x` outlives the handle.
    unsafe {
        // A failed create leaves nothing behind.
        assert_eq!(
            naa_create(1, p.as_mut_ptr(), 1, p.as_mut_ptr(), 1, ptr::null_mut()),
            -1
        );
        assert_eq!(
            naa_create(1, ptr::null_mut(), 1, p.as_mut_ptr(), 1, &mut h),
            -1
        );
        assert_eq!(live_handles(), 0);
        assert_eq!(naa_finalize(&mut h), 0);

        assert_eq!(
            naa_create(1, p.as_mut_ptr(), 1, p.as_mut_ptr(), 1, &mut h),
            0
        );
        assert_eq!(h.function_code, 1);
        assert_eq!(live_handles(), 1);
        for _ in 0..10 {
            assert_eq!(naa_invoke(&mut h), 0);
            assert_eq!(naa_wait(&mut h, &mut st), 0);
        }
        assert_eq!(st.state, naaice_communication_state::FINISHED);
        assert_eq!(st.naa_error, NaaErrorValue(0));
        assert_eq!(st.bytes_received, 4096);
        let copy = h;
        assert_eq!(naa_finalize(&mut h), 0);
        assert_eq!(live_handles(), 0);
        assert!(h.comm_ctx.is_null());
        assert_eq!(naa_finalize(&mut h), 0);
        let mut copy = copy;
        assert_eq!(naa_finalize(&mut copy), -1);
    }
    // 10 RPCs of +1 on the in-place parameter.
    assert!(x.iter().all(|&b| b == 17));

    // AP1: a context, connected, MRSP and 3 RPCs, cleaned up; a failed init leaves nothing.
    let mut sizes = [x.len()];
    let mut params = [x.as_mut_ptr().cast::<std::ffi::c_char>()];
    let mut ctx = ptr::null_mut();
    // SAFETY (all calls below): pointers to live locals; `x` outlives the context.
    unsafe {
        let mut init = |ctx: &mut *mut naaice_communication_context, fncode: u8| {
            naaice_init_communication_context(
                ctx,
                0,
                sizes.as_mut_ptr(),
                params.as_mut_ptr(),
                1,
                0,
                ptr::null_mut(),
                fncode,
                ptr::null(),
                c"127.0.0.1".as_ptr(),
                port as u16,
            )
        };
        assert_eq!(init(&mut ctx, 0), -1);
        assert!(ctx.is_null());
        assert_eq!(live_contexts(), 0);
        // The transport comes from NAAICE_TRANSPORT, as for naa_create.
        // SAFETY: the only test in this binary; the library's threads (the software NAA's)
        // never read the environment.
        std::env::set_var("NAAICE_TRANSPORT", "carrier-pigeon");
        assert_eq!(init(&mut ctx, 1), -1);
        assert_eq!(
            error::naa_last_error_kind(),
            error::naa_error_kind::NAA_ERRKIND_CONFIG
        );
        std::env::set_var("NAAICE_TRANSPORT", "soft");
        assert_eq!(live_contexts(), 0);
        assert_eq!(init(&mut ctx, 1), 0);
        assert_eq!(live_contexts(), 1);
        assert_eq!(naaice_setup_connection(ctx), 0);
        assert_eq!(naaice_set_input_mr(ctx, 0), 0);
        assert_eq!(naaice_set_output_mr(ctx, 0), 0);
        assert_eq!(naaice_do_mrsp(ctx), 0);
        for _ in 0..3 {
            assert_eq!(naaice_do_data_transfer(ctx), 0);
        }
        assert_eq!(naaice_get_bytes_received(ctx), 4096);
        assert_eq!(naaice_disconnect_and_cleanup(ctx), 0);
        assert_eq!(live_contexts(), 0);
        assert_eq!(naaice_disconnect_and_cleanup(ctx), -1);
    }
    assert!(x.iter().all(|&b| b == 20));

    assert_eq!(naa_swnaa_destroy(naa), 0);
    assert_eq!(live_servers(), 0);
    assert_eq!(naa_swnaa_destroy(naa), -1);
    assert_eq!(
        threads_settled(baseline),
        baseline,
        "library threads still running after finalize and destroy"
    );
}
