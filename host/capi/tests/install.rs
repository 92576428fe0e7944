//! `install.sh PREFIX` installs header, libraries and `naaice.pc`, and a C program builds
//! with `cc app.c $(pkg-config --cflags --libs naaice)`, links the shared library and runs
//! against the software NAA.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(300);

#[test]
fn install_then_build_with_pkg_config() {
    let out = out_dir("install");
    let prefix = out.join("prefix");
    let _ = std::fs::remove_dir_all(&prefix);
    let f = run_ok(
        Command::new("sh")
            .arg(crate_dir().join("install.sh"))
            .arg(&prefix)
            .env("NAAICE_LIB_DIR", lib_dir()),
        LIMIT,
    );
    assert!(f.stdout.contains("installed naaice"), "{}", f.stdout);
    for file in [
        "include/naaice.h",
        "include/naaice_ap2.h",
        "lib/libnaaice_ap2.so",
        "lib/libnaaice_ap2.a",
        "lib/pkgconfig/naaice.pc",
    ] {
        assert!(prefix.join(file).is_file(), "{file} not installed");
    }

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
    let libs = prefix.join("lib");

    // It is the installed shared library that the programs load.
    let ldd = run_ok(
        Command::new("ldd")
            .arg(&client)
            .env("LD_LIBRARY_PATH", &libs),
        LIMIT,
    );
    assert!(
        ldd.stdout
            .contains(&libs.join("libnaaice_ap2.so").display().to_string()),
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
