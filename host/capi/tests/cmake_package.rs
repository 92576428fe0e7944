//! The CMake package `install.sh` installs (`PREFIX/lib/cmake/naaice`): installed, then moved
//! to another folder (the package is relocatable), found by the project
//! `tests/cmake_consumer` with `-DCMAKE_PREFIX_PATH`, whose C and C++ programs are built
//! against its targets and run against the software NAA. A version the package does not
//! meet is refused.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::kernels::{VECTOR_ADD, software_naa};
use common::*;

const LIMIT: Duration = Duration::from_secs(600);

/// Configures `tests/cmake_consumer` into `build` against the package under `prefix`.
fn configure(build: &Path, prefix: &Path, version: &str) -> Finished {
    let _ = std::fs::remove_dir_all(build);
    run(
        Command::new("cmake")
            .arg("-S")
            .arg(crate_dir().join("tests/cmake_consumer"))
            .arg("-B")
            .arg(build)
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
            .arg(format!("-DNAAICE_VERSION_EXPECTED={version}"))
            .arg("-DCMAKE_BUILD_TYPE=Debug"),
        LIMIT,
    )
}

#[test]
fn installed_cmake_package_builds_and_runs_c_and_cpp_programs() {
    let out = out_dir("cmake_package");
    let installed = out.join("installed");
    let stdout = install::install(&installed);
    assert!(stdout.contains("installed naaice"), "{stdout}");
    let package = installed.join("lib/cmake/naaice");
    for file in [
        "naaiceConfig.cmake",
        "naaiceConfigVersion.cmake",
        "naaiceTargets.cmake",
    ] {
        let text = std::fs::read_to_string(package.join(file))
            .unwrap_or_else(|e| panic!("{file} not installed: {e}"));
        assert!(
            !text.contains('@'),
            "{file} has an unreplaced placeholder:\n{text}"
        );
        assert!(
            !text.contains(&installed.display().to_string()),
            "{file} names the install prefix (not relocatable)"
        );
    }
    let targets = std::fs::read_to_string(package.join("naaiceTargets.cmake")).expect("read");
    assert!(
        targets.contains("INTERFACE_LINK_LIBRARIES \"gcc_s;util;rt;pthread;m;dl;c\""),
        "{targets}"
    );

    // Relocatable: the package works from wherever the prefix is moved.
    let prefix = out.join("moved");
    let _ = std::fs::remove_dir_all(&prefix);
    std::fs::rename(&installed, &prefix).expect("move the prefix");

    let version = env!("CARGO_PKG_VERSION");
    let build = out.join("build");
    let f = configure(&build, &prefix, version);
    f.assert_clean("cmake configure");
    assert!(
        f.stdout.contains(&format!(
            "found naaice {version} in {}",
            prefix.join("lib/cmake/naaice").display()
        )),
        "{}",
        f.stdout
    );
    run_ok(
        Command::new("cmake")
            .arg("--build")
            .arg(&build)
            .args(["--parallel", "2"]),
        LIMIT,
    );

    let naa = software_naa();
    let spec = format!("127.0.0.1:{}:{VECTOR_ADD}:2", naa.local_addr().port());
    let program = |name: &str| {
        let mut cmd = Command::new(build.join(name));
        cmd.env("NAAICE_TRANSPORT", "soft")
            .env("NAA_SPEC", &spec)
            .env_remove("NAA_LOCAL_IP")
            .env_remove("LD_LIBRARY_PATH");
        cmd
    };
    for name in [
        "vector_add_c_shared",
        "vector_add_c_static",
        "vector_add_c_middleware",
    ] {
        let f = run_ok(program(name).arg("5000"), LIMIT);
        assert!(
            f.stdout.contains("vector add (C): 5000 elements correct"),
            "{name}: {}\n{}",
            f.stdout,
            f.stderr
        );
    }
    for name in ["vector_add_cpp_shared", "vector_add_cpp_static"] {
        let f = run_ok(&mut program(name), LIMIT);
        assert!(
            f.stdout
                .contains("vector add (C++): 4096 elements correct, 2 RPCs"),
            "{name}: {}\n{}",
            f.stdout,
            f.stderr
        );
    }
    naa.shutdown();

    // The shared-library programs load the moved prefix's library (CMake's build RPATH).
    let ldd = run_ok(
        Command::new("ldd").arg(build.join("vector_add_cpp_shared")),
        LIMIT,
    );
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    assert!(
        ldd.stdout.contains(&format!(
            "libnaaice_ap2.so.{major} => {}",
            prefix.join("lib").display()
        )),
        "{}",
        ldd.stdout
    );

    // A version the package does not meet is refused.
    let f = configure(&out.join("build-too-new"), &prefix, "99.0");
    assert!(!f.status.success(), "{}", f.stdout);
    assert!(
        f.stderr.contains("naaice") && f.stderr.contains(version),
        "{}",
        f.stderr
    );
}
