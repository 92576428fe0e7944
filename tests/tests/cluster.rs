//! Many processes sharing a pool of NAAs (`naaice::discovery::select`): rank-aware selection, failover to
//! the next entry, waiting for an NAA at its connection limit, and a 256-rank simulation over
//! 16 NAAs that loses 2 of them mid-run. The rank variables are read once per process, so the
//! multi-process cases run their ranks as child processes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use naaice::discovery::environment::Rank;
use naaice::discovery::select::Pool;
use naaice::discovery::spec;
use naaice::swnaa::SoftNaaConfig;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{Naa, NaaOptions, Param};
use naaice_tests::{is_child, read_line_with_prefix, spawn_child, start_naa};

/// One rank's handle for kernel 1 (add 1) on an in-place region of 64 bytes of `seed`.
fn create(seed: u8, options: &NaaOptions) -> naaice::Result<Naa<SoftEndpoint>> {
    let p = Param::from_vec(vec![seed; 64]);
    Naa::create_with(
        &SoftTransport::default(),
        1,
        vec![p.clone()],
        vec![p],
        options,
    )
}

/// Runs one RPC and checks that every byte went from `seed` to `seed + 1`.
fn rpc(naa: &mut Naa<SoftEndpoint>, seed: u8) -> naaice::Result<()> {
    naa.input(0)?.fill(seed);
    naa.invoke()?;
    assert!(naa.wait()?.naa_error.is_success());
    assert!(naa.output(0)?.iter().all(|&b| b == seed.wrapping_add(1)));
    Ok(())
}

/// Child rank: `Naa::create` (rank from `NAAICE_RANK`/`NAAICE_NRANKS`, NAAs from `NAA_SPEC`),
/// one RPC, prints the port it got, then holds the connection until `RELEASE` exists (if set).
#[test]
#[ignore = "run as a child process by the tests below"]
fn child_rank() {
    if !is_child() {
        return;
    }
    let p = Param::from_vec(vec![9; 64]);
    let mut naa = Naa::create(&SoftTransport::default(), 1, vec![p.clone()], vec![p])
        .unwrap_or_else(|e| panic!("naa create: {e}"));
    rpc(&mut naa, 9).expect("rpc");
    println!("ENTRY {}", naa.entry().expect("an NAA_SPEC entry").port);
    if let Ok(release) = std::env::var("RELEASE") {
        while !std::path::Path::new(&release).exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    naa.finalize();
}

/// Starts 4 ranks against `spec`; returns the port each rank connected to (by rank).
fn four_ranks(spec: &str, release: Option<&std::path::Path>) -> Vec<u16> {
    let release = release.map(|p| p.to_str().expect("utf-8 path").to_owned());
    let mut children: Vec<_> = (0..4)
        .map(|r| {
            let rank = r.to_string();
            let mut env = vec![
                ("NAA_SPEC", spec),
                ("NAAICE_RANK", rank.as_str()),
                ("NAAICE_NRANKS", "4"),
                ("NAAICE_CONNECT_TIMEOUT", "30"),
            ];
            if let Some(path) = &release {
                env.push(("RELEASE", path));
            }
            spawn_child("child_rank", &env)
        })
        .collect();
    let ports = children
        .iter_mut()
        .map(|c| {
            read_line_with_prefix(c, "ENTRY ", Duration::from_secs(60))
                .parse()
                .expect("port")
        })
        .collect();
    if let Some(path) = &release {
        std::fs::write(path, b"").expect("release file");
    }
    for c in children {
        let out = c.wait_with_output().expect("child");
        assert!(
            out.status.success(),
            "rank failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    ports
}

fn limited(max_connections: usize) -> SoftNaaConfig {
    SoftNaaConfig {
        max_connections,
        ..SoftNaaConfig::default()
    }
}

#[test]
fn four_ranks_share_two_naas_by_rank() {
    let (a, b) = (start_naa(limited(2)), start_naa(limited(2)));
    let (pa, pb) = (a.local_addr().port(), b.local_addr().port());
    let dir = std::env::temp_dir().join(format!("naaice-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let release = dir.join("release");
    let _ = std::fs::remove_file(&release);
    // All 4 hold their connection at once: exactly the capacity of the 2 NAAs.
    let ports = four_ranks(
        &format!("127.0.0.1:{pa}:1:1,127.0.0.1:{pb}:1:1"),
        Some(&release),
    );
    assert_eq!(ports, [pa, pb, pa, pb], "ranks are dealt round-robin");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn first_naa_down_all_ranks_fail_over_to_the_second() {
    // A port with nothing listening on it: connections are refused.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let pa = dead.local_addr().unwrap().port();
    drop(dead);
    // The second NAA takes 2 connections at a time; the other 2 ranks are rejected
    // ("overloaded") and retry until a slot is free.
    let b = start_naa(limited(2));
    let pb = b.local_addr().port();
    let ports = four_ranks(&format!("127.0.0.1:{pa}:1:1,127.0.0.1:{pb}:1:1"), None);
    assert_eq!(ports, [pb; 4]);
}

/// Child: a single unreachable entry fails with an error naming it and why.
#[test]
#[ignore = "run as a child process by unreachable_entries_are_named"]
fn child_unreachable() {
    if !is_child() {
        return;
    }
    let err = create(1, &NaaOptions::from_env().unwrap())
        .expect_err("nothing listens")
        .to_string();
    println!("ERROR {err}");
}

#[test]
fn unreachable_entries_are_named() {
    let ports: Vec<u16> = (0..2)
        .map(|_| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        })
        .collect();
    let spec = format!("127.0.0.1:{}:1:1,127.0.0.1:{}:1:1", ports[0], ports[1]);
    let mut child = spawn_child(
        "child_unreachable",
        &[("NAA_SPEC", &spec), ("NAAICE_CONNECT_TIMEOUT", "0.5")],
    );
    let err = read_line_with_prefix(&mut child, "ERROR ", Duration::from_secs(60));
    assert!(child.wait().unwrap().success());
    for (i, p) in ports.iter().enumerate() {
        assert!(
            err.contains(&format!("127.0.0.1:{p} [entry {}]", i + 1)),
            "{err}"
        );
    }
    assert!(err.contains("refused"), "{err}");
}

/// Load per NAA: (max, min) over `alive` NAAs.
fn spread(load: &[usize], alive: impl Fn(usize) -> bool) -> (usize, usize) {
    let live = load.iter().enumerate().filter(|(i, _)| alive(*i));
    let max = live.clone().map(|(_, l)| *l).max().unwrap_or(0);
    let min = live.map(|(_, l)| *l).min().unwrap_or(0);
    (max, min)
}

#[test]
fn simulation_256_ranks_over_16_naas_survives_two_killed() {
    const RANKS: u32 = 256;
    const NAAS: usize = 16;
    const ROUNDS: u8 = 6;
    const KILL_AFTER: u8 = 3;
    const KILLED: [usize; 2] = [3, 11];
    let mut naas: Vec<Option<_>> = (0..NAAS).map(|_| Some(start_naa(limited(64)))).collect();
    let spec_text = naas
        .iter()
        .map(|n| format!("127.0.0.1:{}:1:1", n.as_ref().unwrap().local_addr().port()))
        .collect::<Vec<_>>()
        .join(",");
    let entries = spec::parse(&spec_text).unwrap();
    let first_load: Arc<Vec<AtomicUsize>> =
        Arc::new((0..NAAS).map(|_| AtomicUsize::new(0)).collect());
    let last_load: Arc<Vec<AtomicUsize>> =
        Arc::new((0..NAAS).map(|_| AtomicUsize::new(0)).collect());
    let barrier = Arc::new(Barrier::new(RANKS as usize + 1));
    let ranks: Vec<_> = (0..RANKS)
        .map(|r| {
            let options = NaaOptions {
                // Each simulated rank is a process of its own: its own pool and rank.
                pool: Some(Pool::new(entries.clone())),
                rank: Some(Rank {
                    rank: r,
                    size: Some(RANKS),
                    local: None,
                    source: "simulation",
                }),
                connect_timeout: Duration::from_secs(60),
                rpc_timeout: Duration::from_secs(60),
                ..NaaOptions::default()
            };
            let (first_load, last_load, barrier) = (
                Arc::clone(&first_load),
                Arc::clone(&last_load),
                Arc::clone(&barrier),
            );
            let entries = entries.clone();
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let port_index = |naa: &Naa<SoftEndpoint>| {
                        let port = naa.entry().unwrap().port;
                        entries.iter().position(|e| e.port == port).unwrap()
                    };
                    let mut naa = create(0, &options).expect("first create");
                    first_load[port_index(&naa)].fetch_add(1, Ordering::Relaxed);
                    let mut errors = Vec::new();
                    let mut round = 0u8;
                    while round < ROUNDS {
                        if round == KILL_AFTER && errors.is_empty() {
                            barrier.wait(); // the NAAs die here
                            barrier.wait();
                        }
                        match rpc(&mut naa, round.wrapping_mul(7).wrapping_add(r as u8)) {
                            Ok(()) => round += 1,
                            Err(e) => {
                                assert!(errors.len() < 3, "rank {r}: {errors:?}, then {e}");
                                errors.push(e.to_string());
                                // The next naa_create fails over to a live NAA.
                                naa = create(0, &options).expect("create after failure");
                            }
                        }
                    }
                    last_load[port_index(&naa)].fetch_add(1, Ordering::Relaxed);
                    naa.finalize();
                    errors
                })
                .expect("rank thread")
        })
        .collect();
    barrier.wait();
    for k in KILLED {
        naas[k].take().unwrap().shutdown();
    }
    barrier.wait();
    let errors: Vec<Vec<String>> = ranks.into_iter().map(|t| t.join().expect("rank")).collect();
    let load = |l: &Vec<AtomicUsize>| {
        l.iter()
            .map(|a| a.load(Ordering::Relaxed))
            .collect::<Vec<_>>()
    };
    let (first, last) = (load(&first_load), load(&last_load));
    let affected = errors.iter().filter(|e| !e.is_empty()).count();
    let (fmax, fmin) = spread(&first, |_| true);
    let (lmax, lmin) = spread(&last, |i| !KILLED.contains(&i));
    println!(
        "simulation: {RANKS} ranks over {NAAS} NAAs; load per NAA before the kill: max {fmax} min {fmin}"
    );
    println!(
        "simulation: after killing NAAs {KILLED:?}: {affected} ranks saw an error and failed over; \
         load per live NAA: max {lmax} min {lmin}; per NAA {last:?}"
    );
    if let Some(e) = errors.iter().find(|e| !e.is_empty()) {
        println!("simulation: a failed-over rank's error: {}", e[0]);
    }
    assert_eq!((fmax, fmin), (16, 16), "{first:?}");
    assert_eq!(affected, 32, "exactly the ranks of the 2 killed NAAs");
    assert!(KILLED.iter().all(|&k| last[k] == 0), "{last:?}");
    assert_eq!(last.iter().sum::<usize>(), RANKS as usize);
    // The 32 ranks spread over the 14 live NAAs rather than onto one neighbour.
    assert!(lmax <= 16 + 4, "{last:?}");
}

#[test]
fn an_naa_that_is_still_starting_is_waited_for() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        naaice::swnaa::SoftNaa::bind(
            SoftTransport::default(),
            addr,
            SoftNaaConfig::default(),
            naaice_tests::test_kernels(),
        )
        .and_then(naaice::swnaa::SoftNaa::spawn)
        .expect("late NAA")
    });
    let options = NaaOptions {
        pool: Some(Pool::new(
            spec::parse(&format!("127.0.0.1:{port}:1:1")).unwrap(),
        )),
        rank: Some(Rank::SINGLE),
        connect_timeout: Duration::from_secs(30),
        ..NaaOptions::default()
    };
    // Refused at first; the backoff loop connects once the NAA listens.
    let mut naa = create(4, &options).expect("connects once the NAA is up");
    rpc(&mut naa, 4).unwrap();
    naa.finalize();
    late.join().unwrap().shutdown();
}

/// `slurm/naaice-spec` accepts every option of its table in docs/configuration.md (and no
/// option of the script is missing there), and prints a spec from an inventory.
#[test]
fn naaice_spec_options_are_documented_and_work() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    let script = std::fs::read_to_string(root.join("slurm/naaice-spec")).unwrap();
    let section = doc
        .split("## naaice-spec")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/configuration.md has a naaice-spec section");
    let documented: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `--"))
        .map(|l| l.split('`').next().unwrap_or(""))
        .collect();
    let accepted: Vec<&str> = script
        .lines()
        .filter_map(|l| l.trim().split(')').next())
        .flat_map(|pattern| pattern.split('|').map(str::trim))
        .filter_map(|p| p.strip_prefix("--"))
        .collect();
    assert!(!documented.is_empty(), "{section}");
    let mut a = accepted.clone();
    let mut d = documented.clone();
    a.sort_unstable();
    d.sort_unstable();
    assert_eq!(
        a, d,
        "options of slurm/naaice-spec vs docs/configuration.md"
    );
    let inventory = std::env::temp_dir().join(format!("naaice-spec-{}.txt", std::process::id()));
    std::fs::write(
        &inventory,
        "# inventory\nnaa 10.0.0.11 12345 1 1\nnaa 10.0.0.12 12345 1 1\n",
    )
    .unwrap();
    let out = std::process::Command::new("sh")
        .arg(root.join("slurm/naaice-spec"))
        .args([
            "--inventory",
            inventory.to_str().unwrap(),
            "--licenses",
            "naa:2",
            "--job",
            "7",
        ])
        .output()
        .expect("run naaice-spec");
    let _ = std::fs::remove_file(&inventory);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spec = String::from_utf8_lossy(&out.stdout);
    assert!(
        spec.contains("10.0.0.11:12345:1:1") && spec.contains("10.0.0.12:12345:1:1"),
        "{spec}"
    );
}
