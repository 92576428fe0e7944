//! Gives `libnaaice_ap2.so` its SONAME, `libnaaice_ap2.so.<major>` (Linux and other ELF
//! targets), so that programs record the ABI generation they were linked against and
//! `install.sh` can install the versioned file with its symlinks.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let elf = matches!(
        os.as_str(),
        "linux" | "android" | "freebsd" | "netbsd" | "openbsd" | "dragonfly"
    );
    if elf {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libnaaice_ap2.so.{major}");
    }
}
