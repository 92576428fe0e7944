//! The committed header `include/naaice_ap2.h` is what cbindgen generates from this crate:
//! this test fails when they differ. `NAAICE_BLESS=1` rewrites the committed file instead.

use std::path::Path;

#[test]
fn committed_header_matches_the_code() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml is valid");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");
    let path = crate_dir.join("include/naaice_ap2.h");
    if std::env::var_os("NAAICE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/naaice_ap2.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/naaice_ap2.h is out of date with the code; regenerate it with \
         `NAAICE_BLESS=1 cargo test -p naaice-capi --test header` and commit it"
    );
}
