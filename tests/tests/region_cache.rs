//! The software NAA keeps the region memory of ended connections for the next ones
//! (`SoftNaaConfig::region_cache`): a client that connects with a region of a kept block's
//! size gets that memory, zeroed, never another client's bytes; with the cache off, or for a
//! size nobody left behind, it gets fresh memory. Over the software transport and in process.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use naaice::Param;
use naaice::core::{FunctionCode, ReturnCode};
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaaConfig, SoftNaaHandle};
use naaice_tests::site::Site;
use scrape::{scrape, value};

mod scrape;

const CODE: u8 = 31;
const LEN: usize = 1 << 20;

/// What the kernel saw of its output region: its address, and whether it was all zero.
type Seen = Arc<Mutex<Vec<(usize, bool)>>>;

/// Kernel 31: records its output region (parameter 1), then fills it with the input's first
/// byte.
fn recording_kernels(seen: &Seen) -> KernelRegistry {
    let mut kernels = KernelRegistry::builtin();
    let seen = Arc::clone(seen);
    kernels.register(
        FunctionCode::new(CODE).expect("code"),
        move |ctx: &mut KernelContext<'_, '_>| {
            let fill = ctx.param(0).map_or(0, |p| p[0]);
            if let Some(out) = ctx.param(1) {
                let zero = out.iter().all(|&b| b == 0);
                seen.lock().unwrap().push((out.as_ptr() as usize, zero));
                out.fill(fill);
            }
            ReturnCode::SUCCESS
        },
    );
    kernels
}

/// One handle with a 1-byte input and an output-only region of `len` bytes; one RPC, its
/// output checked; the handle then ends.
fn one_client(site: &Site, naa: &SoftNaaHandle, fill: u8, len: usize) {
    let input = Param::from_vec(vec![fill]);
    let output = Param::from_vec(vec![0; len]);
    let mut handle = site.create(naa, u32::from(CODE), vec![input], vec![output]);
    handle.invoke().expect("invoke");
    handle.wait().expect("wait");
    assert!(handle.output(0).expect("output").iter().all(|&b| b == fill));
}

/// The NAA's worker keeps the memory once its connection has ended, just after the client's
/// handle ended: waits until the NAA keeps `bytes` (its metrics say so).
fn wait_until_kept(naa: &SoftNaaHandle, bytes: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let kept = value(&scrape(naa), "naaice_naa_region_cache_bytes", &[]);
        if kept == bytes as f64 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the NAA keeps {kept} bytes, not {bytes}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn check(site: Site) {
    let seen = Seen::default();
    let config = SoftNaaConfig {
        metrics: Some("127.0.0.1:0".parse().expect("address")),
        ..SoftNaaConfig::default()
    };
    let naa = site.start_naa_with(config, recording_kernels(&seen));
    wait_until_kept(&naa, 0);
    one_client(&site, &naa, 0xAB, LEN);
    wait_until_kept(&naa, LEN);
    one_client(&site, &naa, 0xCD, LEN);
    wait_until_kept(&naa, LEN);
    // Another size does not take the kept block.
    one_client(&site, &naa, 0xEF, LEN + 4096);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert!(
        seen.iter().all(|&(_, zero)| zero),
        "a region starts zeroed, never with another client's bytes: {seen:?}"
    );
    assert_eq!(
        seen[1].0, seen[0].0,
        "the second client got the first one's memory"
    );
    assert_ne!(seen[2].0, seen[1].0, "another size gets other memory");
}

#[test]
fn the_next_client_gets_the_memory_zeroed_over_the_software_transport() {
    check(Site::soft());
}

#[test]
fn the_next_client_gets_the_memory_zeroed_in_process() {
    check(Site::local());
}
