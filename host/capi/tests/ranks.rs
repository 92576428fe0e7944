//! Through the C functions: `naa_create` chooses among `NAA_SPEC` entries by the launcher's
//! rank variables and fails over exactly like `Naa::create` in Rust (one parser, one policy in
//! the library). Two software NAAs serve function code 1 with different kernels (+1 and +2),
//! so the result shows which one a rank reached. Rank variables are read once per process:
//! every case runs in a child process.

use std::ffi::c_void;
use std::process::Command;
use std::ptr;

use naaice::core::{FunctionCode, ReturnCode};
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::SoftTransport;
use naaice_ap2::ap2::*;
use naaice_ap2::*;

/// A software NAA whose kernel 1 adds `delta` to every byte of every parameter.
fn naa_adding(delta: u8) -> SoftNaaHandle {
    let mut kernels = KernelRegistry::empty();
    kernels.register(
        FunctionCode::new(1).unwrap(),
        move |ctx: &mut KernelContext<'_, '_>| {
            for r in ctx.regions().iter_mut().filter(|r| !r.is_internal()) {
                r.data.iter_mut().for_each(|b| *b = b.wrapping_add(delta));
            }
            ReturnCode::SUCCESS
        },
    );
    SoftNaa::bind(
        SoftTransport::default(),
        "127.0.0.1:0".parse().unwrap(),
        SoftNaaConfig::default(),
        kernels,
    )
    .and_then(SoftNaa::spawn)
    .expect("software NAA")
}

/// Child: one `naa_create` + RPC through the C ABI; prints `DELTA n` (what the NAA added) or
/// `CREATE FAILED`.
#[test]
#[ignore = "run as a child process by c_abi_selects_by_rank_and_fails_over"]
fn child() {
    if std::env::var_os("NAAICE_CHILD").is_none() {
        return;
    }
    let mut x = vec![10u8; 256];
    let mut p = [naa_param_t {
        addr: x.as_mut_ptr().cast::<c_void>(),
        size: x.len(),
        single_send: CBool(0),
    }];
    let mut h = naa_handle {
        function_code: 0,
        comm_ctx: ptr::null_mut(),
    };
    let mut st = naa_status::in_state(naaice_communication_state::INIT);
    // SAFETY: pointers to live locals; `x` outlives the handle (finalized below).
    unsafe {
        if naa_create(1, p.as_mut_ptr(), 1, p.as_mut_ptr(), 1, &mut h) != 0 {
            println!("CREATE FAILED");
            assert_eq!(naa_finalize(&mut h), 0);
            return;
        }
        assert_eq!(naa_invoke(&mut h), 0);
        assert_eq!(naa_wait(&mut h, &mut st), 0);
        assert_eq!(naa_finalize(&mut h), 0);
    }
    assert!(x.iter().all(|&b| b == x[0]));
    println!("DELTA {}", x[0] - 10);
}

/// Runs the child with `env` and returns what it printed after "DELTA " (or the failure).
fn run(env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child", "--ignored", "--nocapture"])
        .env("NAAICE_CHILD", "1")
        .env("NAAICE_TRANSPORT", "soft")
        .env("NAAICE_CONNECT_TIMEOUT", "20");
    for var in [
        "NAAICE_RANK",
        "NAAICE_NRANKS",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_LOCALID",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "PMI_RANK",
        "PMI_SIZE",
        "PMIX_RANK",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child {env:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if stdout.contains("CREATE FAILED") {
        return format!(
            "CREATE FAILED: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let at = stdout.find("DELTA ").expect("child printed its result");
    stdout[at + 6..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn c_abi_selects_by_rank_and_fails_over() {
    let (plus1, plus2) = (naa_adding(1), naa_adding(2));
    let (p1, p2) = (plus1.local_addr().port(), plus2.local_addr().port());
    let spec = format!("127.0.0.1:{p1}:1:1,127.0.0.1:{p2}:1:1");
    let spec = spec.as_str();
    // Explicit ranks: dealt round-robin.
    for (rank, delta) in [("0", "1"), ("1", "2"), ("2", "1"), ("3", "2")] {
        let got = run(&[
            ("NAA_SPEC", spec),
            ("NAAICE_RANK", rank),
            ("NAAICE_NRANKS", "4"),
        ]);
        assert_eq!(got, delta, "rank {rank}");
    }
    // The launchers' variables, and NAAICE_RANK winning over them.
    let slurm = [
        ("NAA_SPEC", spec),
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
    ];
    assert_eq!(run(&slurm), "2");
    assert_eq!(
        run(&[slurm[0], slurm[1], slurm[2], ("NAAICE_RANK", "0")]),
        "1"
    );
    let ompi = [
        ("NAA_SPEC", spec),
        ("OMPI_COMM_WORLD_RANK", "3"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
    ];
    assert_eq!(run(&ompi), "2");
    assert_eq!(
        run(&[("NAA_SPEC", spec), ("PMI_RANK", "1"), ("PMI_SIZE", "2")]),
        "2"
    );
    assert_eq!(run(&[("NAA_SPEC", spec), ("PMIX_RANK", "2")]), "1");
    // Rank 0 prefers the first entry; with nothing listening there it fails over.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let pd = dead.local_addr().unwrap().port();
    drop(dead);
    let failover = format!("127.0.0.1:{pd}:1:1,127.0.0.1:{p2}:1:1");
    assert_eq!(run(&[("NAA_SPEC", &failover), ("NAAICE_RANK", "0")]), "2");
    // Malformed variables fail naa_create with the variable named, as in Rust.
    let got = run(&[("NAA_SPEC", spec), ("NAAICE_RPC_TIMEOUT", "soon")]);
    assert!(
        got.starts_with("CREATE FAILED") && got.contains("NAAICE_RPC_TIMEOUT"),
        "{got}"
    );
    let got = run(&[("NAA_SPEC", spec), ("SLURM_PROCID", "first")]);
    assert!(
        got.starts_with("CREATE FAILED") && got.contains("SLURM_PROCID"),
        "{got}"
    );
}
