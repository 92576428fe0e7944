//! Emit + parse of a 32-region Advertisement+Request (the largest MRSP message).
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use naaice_core::region::RegionFlags;
use naaice_core::wire::mrsp::{self, RequestRecord};

fn records() -> Vec<RequestRecord> {
    (0..32u64)
        .map(|i| RequestRecord {
            flags: if i % 2 == 0 {
                RegionFlags::INPUT
            } else {
                RegionFlags::OUTPUT
            },
            requested_addr: i * 0x1000,
            addr: 0x7f00_0000_0000 + i * 0x10_0000,
            rkey: 0x1000 + i as u32,
            size: 4096,
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let recs = records();
    let mut buf = [0u8; 772];
    let mut group = c.benchmark_group("mrsp");
    group.bench_function("emit+parse 32-region 0x01", |b| {
        b.iter(|| {
            let len =
                mrsp::emit_advertise_request(&mut buf, black_box(&recs).iter().copied()).unwrap();
            let repr = mrsp::Repr::parse(black_box(&buf[..len])).unwrap();
            black_box(repr)
        })
    });
    group.bench_function("emit 32-region 0x01", |b| {
        b.iter(|| mrsp::emit_advertise_request(&mut buf, black_box(&recs).iter().copied()).unwrap())
    });
    let len = mrsp::emit_advertise_request(&mut buf, recs.iter().copied()).unwrap();
    group.bench_function("parse 32-region 0x01", |b| {
        b.iter(|| mrsp::Repr::parse(black_box(&buf[..len])).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
