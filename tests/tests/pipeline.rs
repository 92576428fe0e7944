//! `naaice::Pipeline`: a large array offloaded in chunks over several connections. Proven
//! without timing: the NAA's kernel for chunk k meets the kernel of chunk k+1 at a
//! rendezvous of two, which chunks sent one after the other would miss; every byte of every
//! chunk (the padded tail too) is checked; an NAA that takes one connection gets a pipeline
//! of one lane with the same results; a failing chunk stops the pipeline and is reported.

use std::net::SocketAddr;
use std::time::Duration;

use naaice::core::{FunctionCode, ReturnCode};
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{NaaOptions, Pipeline};
use naaice_tests::rendezvous::{RENDEZVOUS_MISSED, Rendezvous};

/// Adds chunk number + 1 to every byte, after meeting the other lane's kernel.
const PAIRED: u8 = 60;
/// Adds chunk number + 1 to every byte.
const PLAIN: u8 = 61;
/// As `PLAIN`, but chunk 3 fails with 0x20.
const FAILS_AT_3: u8 = 62;
const CHUNK: usize = 4096;

fn chunk_of(ctx: &KernelContext<'_, '_>) -> usize {
    let [a, b, c] = ctx.user_bytes();
    usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c)
}

fn add_chunk_number(ctx: &mut KernelContext<'_, '_>) {
    let add = (chunk_of(ctx) + 1) as u8;
    let region = ctx.param(0).expect("one parameter");
    for b in region.iter_mut() {
        *b = b.wrapping_add(add);
    }
}

fn naa(max_connections: usize) -> SoftNaaHandle {
    let meet = Rendezvous::new(2);
    let mut kernels = KernelRegistry::builtin();
    let code = |c| FunctionCode::new(c).unwrap();
    kernels.register(code(PAIRED), move |ctx: &mut KernelContext<'_, '_>| {
        if !meet.arrive(Duration::from_secs(20)) {
            return ReturnCode::new(u32::from(RENDEZVOUS_MISSED)).unwrap();
        }
        add_chunk_number(ctx);
        ReturnCode::SUCCESS
    });
    kernels.register(code(PLAIN), |ctx: &mut KernelContext<'_, '_>| {
        add_chunk_number(ctx);
        ReturnCode::SUCCESS
    });
    kernels.register(code(FAILS_AT_3), |ctx: &mut KernelContext<'_, '_>| {
        if chunk_of(ctx) == 3 {
            return ReturnCode::new(0x20).unwrap();
        }
        add_chunk_number(ctx);
        ReturnCode::SUCCESS
    });
    let config = SoftNaaConfig {
        max_connections,
        ..SoftNaaConfig::default()
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    SoftNaa::bind(SoftTransport::default(), addr, config, kernels)
        .expect("bind")
        .spawn()
        .expect("spawn")
}

fn pipeline(naa: &SoftNaaHandle, code: u8, depth: usize) -> Pipeline<SoftEndpoint> {
    Pipeline::create_with(
        &SoftTransport::default(),
        u32::from(code),
        CHUNK,
        depth,
        &NaaOptions::at(naa.local_addr()),
    )
    .expect("pipeline")
}

fn input(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 253) as u8).collect()
}

/// `input` with chunk number + 1 added to every byte of each chunk.
fn expected(input: &[u8]) -> Vec<u8> {
    input
        .iter()
        .enumerate()
        .map(|(i, b)| b.wrapping_add((i / CHUNK + 1) as u8))
        .collect()
}

#[test]
fn two_lanes_keep_two_chunks_at_the_naa_at_once_and_every_byte_arrives() {
    let naa = naa(4);
    let mut p = pipeline(&naa, PAIRED, 2);
    assert_eq!((p.depth(), p.chunk()), (2, CHUNK));
    // Six chunks, the last one partial (padded at the NAA, cut on the way back).
    let len = 5 * CHUNK + 100;
    let original = input(len);
    for round in 0..3 {
        let mut data = original.clone();
        let report = p.run(&mut data).expect("run");
        assert_eq!(
            report.failed, None,
            "round {round}: 0x55 = a missed rendezvous"
        );
        assert_eq!((report.chunks, report.depth), (6, 2));
        assert!(data == expected(&original), "round {round}: a wrong byte");
    }
    // Out of place: the input stays as it was.
    let mut out = vec![0u8; len];
    let report = p.run_from(&original, &mut out).expect("run_from");
    assert_eq!(report.failed, None);
    assert!(out == expected(&original));
    assert!(
        p.run_from(&original, &mut out[1..]).is_err(),
        "lengths differ"
    );
    p.finalize();
}

#[test]
fn an_naa_that_takes_one_connection_gets_one_lane_with_the_same_result() {
    let naa = naa(1);
    let mut p = pipeline(&naa, PLAIN, 4);
    assert_eq!(p.depth(), 1);
    let original = input(3 * CHUNK + 1);
    let mut data = original.clone();
    let report = p.run(&mut data).expect("run");
    assert_eq!((report.chunks, report.depth, report.failed), (4, 1, None));
    assert!(data == expected(&original));
    // An empty array sends nothing.
    assert_eq!(p.run(&mut []).expect("run").chunks, 0);
    p.finalize();
}

#[test]
fn a_failing_chunk_stops_the_pipeline_and_is_reported() {
    let naa = naa(4);
    let mut p = pipeline(&naa, FAILS_AT_3, 2);
    let original = input(8 * CHUNK);
    let mut data = original.clone();
    let report = p.run(&mut data).expect("run");
    assert_eq!(report.failed, Some((3, ReturnCode::new(0x20).unwrap())));
    // Chunks 0-2 done; 3 failed; 4 was in flight and finished, its result not taken.
    assert_eq!(report.chunks, 5);
    let want = expected(&original);
    assert!(data[..3 * CHUNK] == want[..3 * CHUNK]);
    assert!(data[3 * CHUNK..] == original[3 * CHUNK..]);
    // The lanes stay usable.
    let mut small = original[..2 * CHUNK].to_vec();
    assert_eq!(p.run(&mut small).expect("run").failed, None);
    assert!(small == want[..2 * CHUNK]);
    p.finalize();
}

#[test]
fn bad_sizes_are_refused() {
    let naa = naa(2);
    let options = NaaOptions::at(naa.local_addr());
    let t = SoftTransport::default();
    for (chunk, depth) in [(0, 2), ((1 << 30) + 1, 2), (CHUNK, 0), (CHUNK, 65)] {
        let e = Pipeline::create_with(&t, 3, chunk, depth, &options).unwrap_err();
        assert!(matches!(e, naaice::Error::InvalidArgument(_)), "{e}");
    }
}
