//! Software NAA kernels for the C++ and CMake tests, on native-endian numbers, and a software
//! NAA (software transport, loopback, free port) serving them.

use naaice::core::{FunctionCode, ReturnCode};
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::SoftTransport;

/// Return code of the kernels when the regions are not what the program should have sent.
pub const WRONG_LAYOUT: u8 = 0x10;

/// Return code of [`always_fails`].
pub const APPLICATION_ERROR: u8 = 0x42;

/// Vector addition (function code 10): p2 = p0 + p1 on `i32`.
pub const VECTOR_ADD: u8 = 10;
/// `out = a * x + y` (function code 40): p0 is the scalar `a`, p1 `x`, p2 `y`, p3 `out`, `f64`.
pub const AXPY: u8 = 40;
/// Sum (function code 41): p2 (one `i64`) = sum of p0 (`i32`) + p1 (one `i32`).
pub const SUM: u8 = 41;
/// Function code 42: answers every RPC with [`APPLICATION_ERROR`].
pub const FAILS: u8 = 42;

fn wrong() -> ReturnCode {
    ReturnCode::application(WRONG_LAYOUT).unwrap_or(ReturnCode::KERNEL_TIMEOUT)
}

fn i32s(bytes: &[u8]) -> impl Iterator<Item = i32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
}

fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

/// See [`VECTOR_ADD`].
pub fn vector_add(ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
    let (Some(a), Some(b)) = (
        ctx.param(0).map(|p| p.to_vec()),
        ctx.param(1).map(|p| p.to_vec()),
    ) else {
        return wrong();
    };
    let Some(c) = ctx.param(2) else {
        return wrong();
    };
    if a.len() != b.len() || a.len() != c.len() || a.len() % 4 != 0 {
        return wrong();
    }
    for ((c, a), b) in c.chunks_exact_mut(4).zip(i32s(&a)).zip(i32s(&b)) {
        c.copy_from_slice(&a.wrapping_add(b).to_ne_bytes());
    }
    ReturnCode::SUCCESS
}

/// See [`AXPY`].
pub fn axpy(ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
    let inputs: Vec<Vec<f64>> = (0..3)
        .map(|i| ctx.param(i).map(|p| f64s(p)).unwrap_or_default())
        .collect();
    let [a, x, y] = &inputs[..] else {
        return wrong();
    };
    let Some(out) = ctx.param(3) else {
        return wrong();
    };
    if a.len() != 1 || x.len() != y.len() || out.len() != x.len() * 8 {
        return wrong();
    }
    for ((o, x), y) in out.chunks_exact_mut(8).zip(x).zip(y) {
        o.copy_from_slice(&(a[0] * x + y).to_ne_bytes());
    }
    ReturnCode::SUCCESS
}

/// See [`SUM`].
pub fn sum(ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
    let values: Vec<i32> = ctx.param(0).map(|p| i32s(p).collect()).unwrap_or_default();
    let offset: Vec<i32> = ctx.param(1).map(|p| i32s(p).collect()).unwrap_or_default();
    let Some(out) = ctx.param(2) else {
        return wrong();
    };
    if offset.len() != 1 || out.len() != 8 {
        return wrong();
    }
    let total: i64 = values.iter().map(|&v| i64::from(v)).sum::<i64>() + i64::from(offset[0]);
    out.copy_from_slice(&total.to_ne_bytes());
    ReturnCode::SUCCESS
}

/// See [`FAILS`].
pub fn always_fails(_: &mut KernelContext<'_, '_>) -> ReturnCode {
    ReturnCode::application(APPLICATION_ERROR).unwrap_or(ReturnCode::KERNEL_TIMEOUT)
}

/// A software NAA on a free loopback port (software transport) with the built-in kernels and
/// the kernels above.
pub fn software_naa() -> SoftNaaHandle {
    let mut kernels = KernelRegistry::builtin();
    let code = |c: u8| FunctionCode::new(c).expect("test function codes are 1..=127");
    kernels.register(code(VECTOR_ADD), vector_add);
    kernels.register(code(AXPY), axpy);
    kernels.register(code(SUM), sum);
    kernels.register(code(FAILS), always_fails);
    serve(kernels)
}

/// A software NAA on a free loopback port (software transport, 8 connections) with `kernels`.
pub fn serve(kernels: KernelRegistry) -> SoftNaaHandle {
    let config = SoftNaaConfig {
        max_connections: 8,
        ..SoftNaaConfig::default()
    };
    let addr = "127.0.0.1:0".parse().expect("loopback address");
    SoftNaa::bind(SoftTransport::default(), addr, config, kernels)
        .and_then(SoftNaa::spawn)
        .expect("start the software NAA")
}
