//! Kernels users bring: `naaice-swnaa --kernel` and `--kernels` load C-ABI kernels built
//! here from C (gcc), C++ (g++, `extern "C"`) and Rust (rustc, a `cdylib`), serve them to
//! clients, reload them on SIGHUP while clients run, and refuse what cannot be loaded.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use naaice::core::ReturnCode;
use naaice::transport::soft::SoftTransport;
use naaice::{Naa, NaaOptions, Param};

type SoftNaa = Naa<naaice::transport::soft::SoftEndpoint>;

mod support;
use support::spawn_reading_stderr;

/// The C API's headers (`naaice_ap2.h` declares the kernel signature and region flags).
fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../capi/include")
}

/// A C kernel library: `add` adds its init's configured number to every byte of every
/// parameter region (its fini appends `fini` to the file the config names), `slow` sleeps
/// 300 ms, `answer` returns the application code 0x42.
const C_KERNELS: &str = r#"
#include <naaice_ap2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct state { unsigned add; char fini_log[1024]; };

int add_init(const char *config, void **user_data) {
    if (config == NULL) return 5;
    struct state *s = calloc(1, sizeof *s);
    if (s == NULL) return 6;
    s->add = (unsigned)atoi(config);
    const char *colon = strchr(config, ':');
    if (colon != NULL) snprintf(s->fini_log, sizeof s->fini_log, "%s", colon + 1);
    *user_data = s;
    return s->add == 0 ? 7 : 0;
}

void add_fini(void *user_data) {
    struct state *s = user_data;
    if (s->fini_log[0] != '\0') {
        FILE *f = fopen(s->fini_log, "a");
        if (f != NULL) { fputs("fini\n", f); fclose(f); }
    }
    free(s);
}

uint32_t add(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
             size_t n_regions) {
    (void)call;
    const struct state *s = user_data;
    for (size_t i = 0; i < n_regions; i++) {
        if (regions[i].flags & NAA_REGION_INTERNAL) continue;
        unsigned char *p = regions[i].addr;
        for (size_t j = 0; j < regions[i].size; j++) p[j] = (unsigned char)(p[j] + s->add);
    }
    return 0;
}

uint32_t slow(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
              size_t n_regions) {
    (void)user_data; (void)call; (void)regions; (void)n_regions;
    usleep(300000);
    return 0;
}

uint32_t answer(void *user_data, const naa_swnaa_call *call, naa_swnaa_region *regions,
                size_t n_regions) {
    (void)user_data; (void)call; (void)regions; (void)n_regions;
    return 0x42;
}
"#;

/// A C++ kernel: reverses the bytes of the first parameter with the standard library.
const CXX_KERNEL: &str = r#"
#include <naaice_ap2.h>
#include <algorithm>

extern "C" uint32_t naa_kernel(void *, const naa_swnaa_call *, naa_swnaa_region *regions,
                               size_t n_regions) {
    if (n_regions == 0) return 0x10;
    auto *p = static_cast<unsigned char *>(regions[0].addr);
    std::reverse(p, p + regions[0].size);
    return 0;
}
"#;

/// A Rust kernel in a `cdylib`: XORs every parameter byte with the RPC's first user byte
/// plus 0x5A, with the regions as slices.
const RUST_KERNEL: &str = r#"
use std::ffi::c_void;

#[repr(C)]
pub struct Call { fncode: u8, user_bytes: [u8; 3], rpc: u32 }

#[repr(C)]
pub struct Region { addr: *mut c_void, size: usize, flags: u8 }

#[unsafe(no_mangle)]
pub extern "C" fn xor_kernel(_user: *mut c_void, call: *const Call, regions: *mut Region, n: usize) -> u32 {
    // SAFETY: the NAA hands `n` regions and a call, valid for this call.
    let (call, regions) = unsafe { (&*call, std::slice::from_raw_parts_mut(regions, n)) };
    for r in regions.iter().filter(|r| r.flags & 1 == 0) {
        // SAFETY: each region is `size` writable bytes for this call.
        let bytes = unsafe { std::slice::from_raw_parts_mut(r.addr.cast::<u8>(), r.size) };
        for b in bytes {
            *b ^= 0x5A ^ call.user_bytes[0];
        }
    }
    0
}
"#;

/// A scratch folder removed at the end.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("scratch folder")
}

/// Builds `source` (in `lang`: `c`, `c++`) into the shared library `dir/name` with the C
/// compiler (`CC`, default `cc`) or the C++ one (`CXX`, default `c++`).
fn compile(lang: &str, source: &str, dir: &Path, name: &str) -> PathBuf {
    let cc = match lang {
        "c" => std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()),
        _ => std::env::var("CXX").unwrap_or_else(|_| "c++".to_owned()),
    };
    let cc = cc.as_str();
    let src = dir.join(format!("{name}.{}", if lang == "c" { "c" } else { "cpp" }));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let status = Command::new(cc)
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror"])
        .arg("-I")
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(status.success(), "{cc} failed on {name}");
    out
}

/// `naaice-swnaa` on a free loopback port (software transport, 8 connections) with `args`.
fn swnaa(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_naaice-swnaa"));
    cmd.args([
        "--address",
        "127.0.0.1",
        "--port",
        "0",
        "--transport",
        "soft",
    ])
    .args(["--max-connections", "8"])
    .args(args)
    .env_remove("NAAICE_KERNELS");
    cmd
}

/// A server started with `args` on a free loopback port (software transport); killed on drop.
struct Server {
    child: Option<Child>,
    addr: std::net::SocketAddr,
    lines: mpsc::Receiver<String>,
    banner: String,
}

impl Server {
    fn start(args: &[&str]) -> Self {
        let (tx, lines) = mpsc::channel();
        let child = spawn_reading_stderr(swnaa(args).env_remove("NAAICE_LOG"), move |line| {
            tx.send(line).is_ok()
        });
        let mut server = Self {
            child: Some(child),
            addr: "127.0.0.1:0".parse().unwrap(),
            lines,
            banner: String::new(),
        };
        let first = server.line_with("naaice-swnaa listening on ");
        server.addr = first
            .strip_prefix("naaice-swnaa listening on ")
            .and_then(|r| r.split(' ').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("banner: {first}"));
        server.banner = first;
        server
    }

    /// Waits (up to 60 s) for a stderr line containing `needle`.
    fn line_with(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("no line with {needle:?}: {e}"),
            }
        }
    }

    fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        assert!(
            Command::new("kill")
                .args([name, &pid])
                .status()
                .unwrap()
                .success()
        );
    }

    /// SIGTERM; the server must end with status 0.
    fn stop(mut self) {
        self.signal("-TERM");
        let status = self.child.take().unwrap().wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A handle for function code `code` with one in-place parameter of `len` bytes.
fn handle(addr: std::net::SocketAddr, code: u32, len: usize) -> (SoftNaa, Param) {
    let p = Param::zeroed(len);
    let naa = Naa::create_with(
        &SoftTransport::default(),
        code,
        vec![p.clone()],
        vec![p.clone()],
        &NaaOptions::at(addr),
    )
    .expect("create");
    (naa, p)
}

/// One RPC with `data` in the parameter: the return code and the parameter after it.
fn rpc(naa: &mut SoftNaa, p: &Param, data: &[u8]) -> (ReturnCode, Vec<u8>) {
    p.buffer().lock().copy_from_slice(data);
    naa.invoke().expect("invoke");
    let status = naa.wait().expect("wait");
    (status.naa_error, p.buffer().lock().to_vec())
}

fn plus(data: &[u8], n: u8) -> Vec<u8> {
    data.iter().map(|b| b.wrapping_add(n)).collect()
}

#[test]
fn c_cxx_and_rust_kernels_are_served_by_code_with_their_names() {
    let dir = scratch();
    let c = compile("c", C_KERNELS, dir.path(), "libckernels.so");
    let cxx = compile("c++", CXX_KERNEL, dir.path(), "libcxx.so");
    let rs_src = dir.path().join("xor.rs");
    std::fs::write(&rs_src, RUST_KERNEL).unwrap();
    let rs = dir.path().join("libxor.so");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let status = Command::new(rustc)
        .args(["--edition", "2024", "--crate-type", "cdylib", "-O"])
        .arg(&rs_src)
        .arg("-o")
        .arg(&rs)
        .status()
        .expect("rustc");
    assert!(status.success(), "rustc failed");
    let fini_log = dir.path().join("fini.log");
    let file = dir.path().join("kernels.toml");
    std::fs::write(
        &file,
        format!(
            "[[kernel]]\ncode = 7\nlibrary = \"./libckernels.so\"\nsymbol = \"add\"\nname = \"add from config\"\nconfig = \"5:{}\"\n\n\
             [[kernel]]\ncode = 11\nlibrary = \"./libckernels.so\"\nsymbol = \"slow\"\ntimeout = \"100ms\"\n",
            fini_log.display()
        ),
    )
    .unwrap();
    let server = Server::start(&[
        "--kernels",
        file.to_str().unwrap(),
        "--kernel",
        &format!("8={}", cxx.display()),
        "--kernel",
        &format!("9={}:xor_kernel", rs.display()),
        "--kernel",
        &format!("10={}:answer", c.display()),
    ]);
    assert!(
        server.banner.contains(
            "kernels 1 add1, 2 add2, 3 empty, 7 add from config, 8 naa_kernel, 9 xor_kernel, \
             10 answer, 11 slow;"
        ),
        "{}",
        server.banner
    );
    let data: Vec<u8> = (0..=255).collect();

    let (mut h, p) = handle(server.addr, 7, 256);
    assert_eq!(
        rpc(&mut h, &p, &data),
        (ReturnCode::SUCCESS, plus(&data, 5))
    );
    h.finalize();

    let (mut h, p) = handle(server.addr, 8, 256);
    let reversed: Vec<u8> = data.iter().rev().copied().collect();
    assert_eq!(rpc(&mut h, &p, &data), (ReturnCode::SUCCESS, reversed));
    h.finalize();

    let (mut h, p) = handle(server.addr, 9, 256);
    let xored: Vec<u8> = data.iter().map(|b| b ^ 0x5A).collect();
    assert_eq!(rpc(&mut h, &p, &data), (ReturnCode::SUCCESS, xored));
    h.finalize();

    let (mut h, p) = handle(server.addr, 10, 16);
    assert_eq!(rpc(&mut h, &p, &[1; 16]).0, ReturnCode::new(0x42).unwrap());
    h.finalize();

    // Its own 100 ms timeout, not the server's 10 s; the connection stays usable.
    let (mut h, p) = handle(server.addr, 11, 16);
    assert_eq!(rpc(&mut h, &p, &[1; 16]).0, ReturnCode::KERNEL_TIMEOUT);
    assert_eq!(rpc(&mut h, &p, &[1; 16]).0, ReturnCode::KERNEL_TIMEOUT);
    h.finalize();

    // The built-ins are still there.
    let (mut h, p) = handle(server.addr, 1, 16);
    assert_eq!(
        rpc(&mut h, &p, &[1; 16]),
        (ReturnCode::SUCCESS, vec![2; 16])
    );
    h.finalize();

    assert!(!fini_log.exists(), "fini runs only at the end");
    server.stop();
    let log = std::fs::read_to_string(&fini_log).expect("fini ran at shutdown");
    assert_eq!(log, "fini\n");
}

#[test]
fn what_cannot_be_loaded_stops_the_start_with_the_file_and_symbol_named() {
    let dir = scratch();
    let c = compile("c", C_KERNELS, dir.path(), "libckernels.so");
    let run = |args: &[&str]| {
        let out = swnaa(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let lib = c.to_str().unwrap();
    let missing = format!("7={}/missing.so:add", dir.path().display());
    let cases: [(Vec<String>, Vec<String>); 4] = [
        (
            vec![format!("7={lib}:no_such")],
            vec![format!("{lib} has no symbol `no_such`")],
        ),
        (
            vec![missing],
            vec!["cannot load".to_owned(), "missing.so".to_owned()],
        ),
        // `add` without a config: its init refuses with 5.
        (
            vec![format!("7={lib}:add")],
            vec![format!("`add_init` in {lib} returned 5")],
        ),
        (
            vec![format!("7={lib}:slow"), format!("7={lib}:answer")],
            vec!["function code 7:".to_owned(), "collides with".to_owned()],
        ),
    ];
    for (kernels, needles) in cases {
        let args: Vec<&str> = kernels
            .iter()
            .flat_map(|k| ["--kernel", k.as_str()])
            .collect();
        let (code, err) = run(&args);
        assert_eq!(code, Some(1), "{err}");
        for n in needles {
            assert!(err.contains(&n), "{n:?} missing: {err}");
        }
    }

    let file = dir.path().join("kernels.toml");
    std::fs::write(&file, "[[kernel]]\ncode = 7\nlibary = \"x.so\"\n").unwrap();
    let (code, err) = run(&["--kernels", file.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("unknown field `libary`"), "{err}");

    let (code, err) = run(&["--kernel", "200=x.so"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is not 1-127"), "{err}");

    // Only the loaded kernels: the built-ins are answered SOCKET_UNAVAIL.
    let server = Server::start(&["--no-builtins", "--kernel", &format!("7={lib}:answer")]);
    assert!(
        server.banner.contains("kernels 7 answer;"),
        "{}",
        server.banner
    );
    let (mut h, p) = handle(server.addr, 1, 16);
    assert_eq!(rpc(&mut h, &p, &[1; 16]).0, ReturnCode::SOCKET_UNAVAIL);
    h.finalize();
    server.stop();
}

/// Clients run RPCs on code 7 while SIGHUP swaps its kernel from "add 5" to "add 9" (and
/// adds code 12): every answer is the whole input plus 5 or plus 9, never a mix, and after
/// the reload every new RPC sees plus 9. A failed reload keeps the kernels.
#[test]
fn sighup_swaps_kernels_between_rpcs_with_no_wrong_byte() {
    let dir = scratch();
    compile("c", C_KERNELS, dir.path(), "libold.so");
    compile("c", C_KERNELS, dir.path(), "libnew.so");
    let fini_log = dir.path().join("fini.log");
    let file = dir.path().join("kernels.toml");
    let kernels = |lib: &str, add: u8, more: &str| {
        format!(
            "[[kernel]]\ncode = 7\nlibrary = \"./{lib}\"\nsymbol = \"add\"\nname = \"add {add}\"\nconfig = \"{add}:{}\"\n{more}",
            fini_log.display()
        )
    };
    std::fs::write(&file, kernels("libold.so", 5, "")).unwrap();
    let server = Server::start(&["--kernels", file.to_str().unwrap()]);
    assert!(server.banner.contains("7 add 5;"), "{}", server.banner);

    let stop = Arc::new(AtomicBool::new(false));
    let (swapped, counts) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let clients: Vec<_> = (0..3u8)
        .map(|c| {
            let (stop, swapped, counts) = (stop.clone(), swapped.clone(), counts.clone());
            let addr = server.addr;
            std::thread::spawn(move || {
                let (mut h, p) = handle(addr, 7, 4096);
                let (mut old, mut new, mut i) = (0u64, 0u64, 0u8);
                while !stop.load(Ordering::Relaxed) {
                    let after_swap = swapped.load(Ordering::Acquire);
                    i = i.wrapping_add(1);
                    let data: Vec<u8> = (0..4096u32).map(|j| (j as u8) ^ i ^ c).collect();
                    let (rc, out) = rpc(&mut h, &p, &data);
                    assert_eq!(rc, ReturnCode::SUCCESS);
                    if out == plus(&data, 5) {
                        assert!(
                            !after_swap,
                            "client {c}: old kernel after the reload was seen"
                        );
                        old += 1;
                    } else {
                        assert_eq!(out, plus(&data, 9), "client {c}: a wrong byte");
                        new += 1;
                    }
                    counts.fetch_add(1, Ordering::Relaxed);
                }
                h.finalize();
                (old, new)
            })
        })
        .collect();
    let wait_for = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while counts.load(Ordering::Relaxed) < n {
            assert!(Instant::now() < deadline, "clients stalled");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    wait_for(200);
    std::fs::write(
        &file,
        kernels(
            "libnew.so",
            9,
            "[[kernel]]\ncode = 12\nlibrary = \"./libnew.so\"\nsymbol = \"answer\"\n",
        ),
    )
    .unwrap();
    server.signal("-HUP");
    let line = server.line_with("kernels reloaded");
    assert!(line.contains("7 add 9, 12 answer"), "{line}");
    // Every connection's next call runs on the new kernels.
    swapped.store(true, Ordering::Release);
    let at = counts.load(Ordering::Relaxed);
    wait_for(at + 300);
    // The old library's fini ran once its last RPC was over.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&fini_log).unwrap_or_default() != "fini\n" {
        assert!(
            Instant::now() < deadline,
            "the old kernel's fini did not run"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A reload that fails keeps what is served.
    std::fs::write(&file, "[[kernel]]\ncode = 7\nlibrary = \"./libgone.so\"\n").unwrap();
    server.signal("-HUP");
    let line = server.line_with("kernels not reloaded");
    assert!(line.contains("libgone.so"), "{line}");
    let at = counts.load(Ordering::Relaxed);
    wait_for(at + 100);
    stop.store(true, Ordering::Relaxed);
    let mut totals = (0, 0);
    for c in clients {
        let (old, new) = c.join().expect("client");
        totals = (totals.0 + old, totals.1 + new);
    }
    assert!(totals.0 > 0 && totals.1 > 0, "{totals:?}");
    let (mut h, p) = handle(server.addr, 12, 16);
    assert_eq!(rpc(&mut h, &p, &[0; 16]).0, ReturnCode::new(0x42).unwrap());
    // A library rebuilt in place (same file name) is picked up by the next reload, although
    // its old build is still loaded (this connection holds it).
    compile(
        "c",
        &C_KERNELS.replace("return 0x42;", "return 0x43;"),
        dir.path(),
        "libnew.so",
    );
    std::fs::write(
        &file,
        "[[kernel]]\ncode = 12\nlibrary = \"./libnew.so\"\nsymbol = \"answer\"\n",
    )
    .unwrap();
    server.signal("-HUP");
    server.line_with("kernels reloaded");
    assert_eq!(rpc(&mut h, &p, &[0; 16]).0, ReturnCode::new(0x43).unwrap());
    h.finalize();
    server.stop();
    assert_eq!(std::fs::read_to_string(&fini_log).unwrap(), "fini\nfini\n");
}
