//! Passes the target triple to the program (`naaice-info` reports what it was built for).

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=NAAICE_INFO_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
