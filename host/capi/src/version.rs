//! The library's version, for programs that check at build time (the macros) or at run time
//! (`naa_version`, the library actually loaded). A unit test keeps the constants equal to the
//! crate's version.

use std::ffi::{CStr, c_char};

/// Major version of naaice-rs (`NAAICE_VERSION_MAJOR`); the SONAME is `libnaaice_ap2.so.MAJOR`.
pub const NAAICE_VERSION_MAJOR: u32 = 0;
/// Minor version of naaice-rs (`NAAICE_VERSION_MINOR`).
pub const NAAICE_VERSION_MINOR: u32 = 2;
/// Patch version of naaice-rs (`NAAICE_VERSION_PATCH`).
pub const NAAICE_VERSION_PATCH: u32 = 0;

/// The crate's version, NUL-terminated, for `naa_version`.
const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the crate version has no NUL byte"),
    };

/// The version of the library loaded at run time, e.g. `"0.2.0"` (compare with the header's
/// `NAAICE_VERSION_STRING`, the version the program was built with). Never
/// NULL; the string is static.
#[unsafe(no_mangle)]
pub extern "C" fn naa_version() -> *const c_char {
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_the_crate_version() {
        let parts = [
            NAAICE_VERSION_MAJOR,
            NAAICE_VERSION_MINOR,
            NAAICE_VERSION_PATCH,
        ]
        .map(|p| p.to_string())
        .join(".");
        assert_eq!(parts, env!("CARGO_PKG_VERSION"));
        // The string macro is written in cbindgen-naaice.toml (cbindgen emits no string
        // constants): the committed header must carry this version.
        let header = include_str!("../include/naaice.h");
        let define = format!(
            "#define NAAICE_VERSION_STRING \"{}\"",
            env!("CARGO_PKG_VERSION")
        );
        assert!(header.contains(&define), "naaice.h lacks {define}");
        // SAFETY: naa_version returns a pointer to a static NUL-terminated string.
        let loaded = unsafe { CStr::from_ptr(naa_version()) };
        assert_eq!(loaded.to_str(), Ok(env!("CARGO_PKG_VERSION")));
    }
}
