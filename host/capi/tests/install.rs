//! `install.sh PREFIX` installs headers, libraries (the shared one under its version with
//! its SONAME and symlinks), `naaice.pc`, the programs and their man pages; C programs of
//! both APIs build with `cc app.c $(pkg-config --cflags --libs naaice)`, link the shared
//! library through its SONAME and run against the software NAA.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(300);

/// The SONAME (or NEEDED entries) of an ELF file, from `readelf -d`.
fn dynamic_entries(file: &Path, tag: &str) -> Vec<String> {
    let out = run_ok(Command::new("readelf").arg("-d").arg(file), LIMIT);
    out.stdout
        .lines()
        .filter(|l| l.contains(&format!("({tag})")))
        .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0.to_owned()))
        .collect()
}

fn link_target(path: &Path) -> String {
    std::fs::read_link(path)
        .unwrap_or_else(|e| panic!("{} is not a symlink: {e}", path.display()))
        .display()
        .to_string()
}

#[test]
fn install_then_build_with_pkg_config() {
    let out = out_dir("install");
    let prefix = out.join("prefix");
    let stdout = install::install(&prefix);
    assert!(stdout.contains("installed naaice"), "{stdout}");
    let version = env!("CARGO_PKG_VERSION");
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    let versioned = format!("libnaaice_ap2.so.{version}");
    let soname = format!("libnaaice_ap2.so.{major}");
    for file in [
        "include/naaice.h",
        "include/naaice_ap2.h",
        "include/naaice_ap2_cpp.h",
        "include/naaice.f90",
        &format!("lib/{versioned}"),
        "lib/libnaaice_ap2.a",
        "lib/pkgconfig/naaice.pc",
    ] {
        assert!(prefix.join(file).is_file(), "{file} not installed");
    }
    let libs = prefix.join("lib");

    // The shared library: versioned file, SONAME, and the two symlinks.
    assert!(!libs.join(&versioned).is_symlink());
    assert_eq!(
        dynamic_entries(&libs.join(&versioned), "SONAME"),
        std::slice::from_ref(&soname)
    );
    assert_eq!(link_target(&libs.join(&soname)), versioned);
    assert_eq!(link_target(&libs.join("libnaaice_ap2.so")), soname);

    // The programs and their man pages.
    for program in ["naaice-swnaa", "naaice-bench"] {
        let bin = prefix.join("bin").join(program);
        let v = run_ok(Command::new(&bin).arg("--version"), LIMIT);
        assert!(
            v.stdout.starts_with(&format!("{program} {version}")),
            "{program} --version: {}",
            v.stdout
        );
        let page = prefix.join(format!("share/man/man1/{program}.1"));
        let page =
            std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        assert!(page.contains(&format!(".TH {program} 1")), "{page}");
        assert!(
            page.contains("\\-\\-transport"),
            "{program}.1 documents no options"
        );
    }
    // naaice-info's man page documents its environment and exit status.
    let info = run_ok(
        Command::new(prefix.join("bin/naaice-info")).arg("--version"),
        LIMIT,
    );
    assert!(
        info.stdout.starts_with(&format!("naaice-info {version}")),
        "naaice-info --version: {}",
        info.stdout
    );
    let page = std::fs::read_to_string(prefix.join("share/man/man1/naaice-info.1"))
        .expect("naaice-info.1");
    for section in [
        ".TH naaice-info 1",
        ".SH ENVIRONMENT",
        ".SH \"EXIT STATUS\"",
        "\\-\\-probe",
    ] {
        assert!(page.contains(section), "naaice-info.1 lacks {section}");
    }
    let help = run_ok(
        Command::new(prefix.join("bin/naaice-bench")).arg("--help"),
        LIMIT,
    );
    assert!(help.stdout.contains("--naa <HOST:PORT>"), "{}", help.stdout);

    let pkg = run_ok(
        Command::new("pkg-config")
            .args(["--cflags", "--libs", "naaice"])
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")),
        LIMIT,
    );
    let flags: Vec<&str> = pkg.stdout.split_whitespace().collect();
    assert!(flags.contains(&"-lnaaice_ap2"), "{flags:?}");
    let version = run_ok(
        Command::new("pkg-config")
            .args(["--modversion", "naaice"])
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")),
        LIMIT,
    );
    assert_eq!(version.stdout.trim(), env!("CARGO_PKG_VERSION"));
    // A static link needs no rdma-core (the library loads it at run time).
    let static_libs = run_ok(
        Command::new("pkg-config")
            .args(["--static", "--libs", "naaice"])
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")),
        LIMIT,
    );
    assert!(
        !static_libs.stdout.contains("rdma") && !static_libs.stdout.contains("ibverbs"),
        "{}",
        static_libs.stdout
    );

    // cc app.c $(pkg-config --cflags --libs naaice)
    let build = |name: &str| {
        let bin = out.join(name);
        run_ok(
            cc().args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
                .arg(crate_dir().join(format!("examples/{name}.c")))
                .arg("-o")
                .arg(&bin)
                .args(&flags),
            LIMIT,
        );
        bin
    };
    let server = build("swnaa_server");
    let client = build("vector_add");

    // A low-level (AP1) program including only <naaice.h> builds with the same flags.
    let ap1 = out.join("ap1_client");
    run_ok(
        cc().args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg("-I")
            .arg(crate_dir().join("tests/c"))
            .arg(crate_dir().join("tests/c/ap1_client.c"))
            .arg("-o")
            .arg(&ap1)
            .args(&flags),
        LIMIT,
    );
    // Programs record the SONAME, not the file they were linked with.
    for program in [&ap1, &client] {
        assert_eq!(
            dynamic_entries(program, "NEEDED")
                .iter()
                .filter(|n| n.contains("naaice"))
                .collect::<Vec<_>>(),
            [&soname]
        );
    }

    // It is the installed shared library that the programs load.
    let ldd = run_ok(
        Command::new("ldd")
            .arg(&client)
            .env("LD_LIBRARY_PATH", &libs),
        LIMIT,
    );
    assert!(
        ldd.stdout
            .contains(&format!("{soname} => {}", libs.join(&soname).display())),
        "{}",
        ldd.stdout
    );

    let mut cmd = Command::new(server);
    cmd.env("LD_LIBRARY_PATH", &libs)
        .env("NAAICE_TRANSPORT", "soft");
    let (server, port, lines) = start_server(cmd);
    let f = run_ok(
        Command::new(client)
            .env("LD_LIBRARY_PATH", &libs)
            .env("NAAICE_TRANSPORT", "soft")
            .env("NAA_SPEC", format!("127.0.0.1:{port}:10:2"))
            .arg("1000"),
        LIMIT,
    );
    assert!(
        f.stdout.contains("RPC 2 (naa_wait): 1000 elements correct"),
        "{}",
        f.stdout
    );
    terminate(&server);
    finish_server(server, lines).assert_clean("the installed software NAA");
}

/// A package build: `DESTDIR` stages the files while `naaice.pc` names the final paths,
/// `LIBDIR` moves the libraries and the CMake package, and `--uninstall` removes every file
/// install put down.
#[test]
fn staged_install_with_a_libdir_then_uninstall() {
    let stage = out_dir("install-staged").join("stage");
    let _ = std::fs::remove_dir_all(&stage);
    let prefix = "/opt/naaice-test";
    let libdir = "/opt/naaice-test/lib64";
    let run_script = |args: &[&str]| {
        run_ok(
            Command::new("sh")
                .arg(crate_dir().join("install.sh"))
                .args(args)
                .env("DESTDIR", &stage)
                .env("LIBDIR", libdir)
                .env("NAAICE_LIB_DIR", lib_dir())
                .env("NAAICE_BIN_DIR", install::programs_dir()),
            LIMIT,
        )
    };
    let f = run_script(&[prefix]);
    assert!(f.stdout.contains("installed naaice"), "{}", f.stdout);
    let staged = |path: &str| stage.join(path.trim_start_matches('/'));
    let version = env!("CARGO_PKG_VERSION");
    for file in [
        format!("{libdir}/libnaaice_ap2.so.{version}"),
        format!("{libdir}/libnaaice_ap2.a"),
        format!("{libdir}/cmake/naaice/naaiceTargets.cmake"),
        format!("{prefix}/include/naaice_ap2_cpp.h"),
        format!("{prefix}/bin/naaice-info"),
        format!("{prefix}/bin/naaice-spec"),
        format!("{prefix}/share/man/man1/naaice-info.1"),
        format!("{prefix}/share/man/man7/naaice.7"),
        // Section 3: a page per function of the C headers (docs/man/man3).
        format!("{prefix}/share/man/man3/naa_create.3"),
        format!("{prefix}/share/man/man3/naaice_init_communication_context.3"),
    ] {
        assert!(staged(&file).is_file(), "{file} not staged");
    }
    let page = std::fs::read_to_string(staged(&format!("{prefix}/share/man/man3/naa_wait.3")))
        .expect("naa_wait.3");
    assert!(
        page.contains(".TH naa_wait 3") && page.contains("int naa_wait(struct naa_handle *handle"),
        "{page}"
    );
    assert!(
        !Path::new(prefix).exists(),
        "nothing may land outside DESTDIR"
    );
    let pc = std::fs::read_to_string(staged(&format!("{libdir}/pkgconfig/naaice.pc"))).unwrap();
    assert!(
        pc.contains(&format!("prefix={prefix}\n")) && pc.contains(&format!("libdir={libdir}\n")),
        "{pc}"
    );
    assert!(!pc.contains(stage.to_str().unwrap()), "{pc}");
    // The Fortran module's source, found through pkg-config.
    assert!(
        pc.contains("fortran_module=${includedir}/naaice.f90\n"),
        "{pc}"
    );
    let targets = std::fs::read_to_string(staged(&format!(
        "{libdir}/cmake/naaice/naaiceTargets.cmake"
    )))
    .unwrap();
    assert!(targets.contains(&format!("{prefix}/include")), "{targets}");

    let f = run_script(&["--uninstall", prefix]);
    assert!(f.stdout.contains("removed"), "{}", f.stdout);
    let mut left = Vec::new();
    let mut dirs = vec![stage.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() && !path.is_symlink() {
                dirs.push(path);
            } else {
                left.push(path);
            }
        }
    }
    assert!(left.is_empty(), "left after --uninstall: {left:?}");
}
