//! The committed headers `include/naaice.h` (AP1, shared types, last error) and
//! `include/naaice_ap2.h` (AP2, software NAA; includes `naaice.h`) are what cbindgen generates
//! from this crate: this test fails when they differ. `NAAICE_BLESS=1` rewrites the committed
//! files instead.

use std::path::Path;

/// Generates `include/{header}` from `sources` with the cbindgen configuration `config`.
fn check(header: &str, config: &str, sources: &[&str]) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join(config)).expect("the cbindgen config is valid");
    let mut builder = cbindgen::Builder::new().with_config(config);
    for s in sources {
        builder = builder.with_src(crate_dir.join(s));
    }
    let bindings = builder.generate().expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");
    let path = crate_dir.join("include").join(header);
    if std::env::var_os("NAAICE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/{header} is out of date with the code; regenerate it with \
         `NAAICE_BLESS=1 cargo test -p naaice-capi --test header` and commit it"
    );
}

#[test]
fn committed_naaice_h_matches_the_code() {
    check(
        "naaice.h",
        "cbindgen-naaice.toml",
        &[
            "src/version.rs",
            "src/ap1/types.rs",
            "src/ap1.rs",
            "src/error.rs",
        ],
    );
}

#[test]
fn committed_naaice_ap2_h_matches_the_code() {
    check(
        "naaice_ap2.h",
        "cbindgen.toml",
        &[
            "src/types.rs",
            "src/ap2.rs",
            "src/swnaa.rs",
            // naaice-rs extensions (not in the reference), at the end of the header.
            "src/ap2/call.rs",
            "src/local.rs",
            "src/ap2/set.rs",
        ],
    );
}
