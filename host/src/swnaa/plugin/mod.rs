//! Kernels users bring: C-ABI kernels loaded from shared libraries, as `naaice-swnaa
//! --kernel CODE=PATH[:SYMBOL]` and its kernels file (`--kernels FILE`) ask.
//!
//! A kernel is a function with the `naa_swnaa_kernel` signature of `naaice_ap2.h`
//! ([`CKernelFn`](super::CKernelFn)), in C, C++ (`extern "C"`), Rust (`extern "C"` in a
//! `cdylib`) or anything else that exports C functions. Optionally the library also exports
//! a state pair: `int SYMBOL_init(const char *config, void **user_data)`, called once at load
//! (a non-zero return refuses the load), and `void SYMBOL_fini(void *user_data)`, called when
//! the kernel is unloaded (after its last RPC). The kernels file names them explicitly and
//! passes `config`.
//!
//! ```toml
//! # kernels.toml
//! [[kernel]]
//! code = 7
//! library = "build/libscale.so"   # relative to this file; a bare name is searched like dlopen
//! symbol = "scale"                # default: naa_kernel
//! name = "scale"                  # default: the symbol
//! timeout = "30s"                 # default: the server's --kernel-timeout
//! config = "factor=2"             # handed to the init function
//! ```
//!
//! Everything is checked before the server starts: a missing library or symbol, an init that
//! refuses, two kernels for one code are [`PluginError`]s naming the file and symbol.

mod file;
// dlopen, dlsym and the calls of a plugin's init and fini (FFI).
#[allow(unsafe_code)]
mod library;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use naaice_core::FunctionCode;

pub use file::read_kernels_file;
use library::load;

use super::kernel::KernelRegistry;

/// The symbol of a kernel when none is named.
pub const DEFAULT_SYMBOL: &str = "naa_kernel";

/// One kernel to load: where from, under which code and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSpec {
    /// Function code (1-127) it serves.
    pub code: FunctionCode,
    /// The shared library: a path, or a bare file name searched as `dlopen(3)` does.
    pub library: PathBuf,
    /// The kernel function's symbol.
    pub symbol: String,
    /// Name shown in the banner, the logs and `naaice-info --probe` (default: the symbol).
    pub name: Option<String>,
    /// Its own kernel timeout (default: the server's).
    pub timeout: Option<Duration>,
    /// The init function (default: `SYMBOL_init` where the library has it).
    pub init: Option<String>,
    /// The fini function (default: `SYMBOL_fini` where the library has it).
    pub fini: Option<String>,
    /// Handed to the init function (`NULL` without).
    pub config: Option<String>,
    /// Where it was given (`--kernel`, or the kernels file), for messages.
    pub origin: String,
}

impl KernelSpec {
    /// The name it is served under.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.symbol)
    }
}

/// Why a kernel could not be loaded (the server does not start; a reload keeps the kernels
/// it had).
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// A `--kernel` argument that is not `CODE=PATH[:SYMBOL]`.
    #[error("--kernel {given:?}: {why} (expected CODE=PATH[:SYMBOL], e.g. 7=./libscale.so:scale)")]
    Spec {
        /// The argument.
        given: String,
        /// What is wrong with it.
        why: String,
    },
    /// The kernels file cannot be read or is not valid.
    #[error("kernels file {path}: {why}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The library cannot be loaded.
    #[error("{origin}: cannot load {library}: {why}")]
    Library {
        /// Where the kernel was given.
        origin: String,
        /// The library.
        library: PathBuf,
        /// The loader's message.
        why: String,
    },
    /// The library has no such symbol.
    #[error("{origin}: {library} has no symbol `{symbol}` ({why})")]
    Symbol {
        /// Where the kernel was given.
        origin: String,
        /// The library.
        library: PathBuf,
        /// The symbol looked for.
        symbol: String,
        /// The loader's message.
        why: String,
    },
    /// The kernel's init function refused.
    #[error(
        "{origin}: `{symbol}` in {library} returned {status} (non-zero: the kernel refused to load)"
    )]
    Init {
        /// Where the kernel was given.
        origin: String,
        /// The library.
        library: PathBuf,
        /// The init function.
        symbol: String,
        /// What it returned.
        status: i32,
    },
    /// Two kernels for one function code.
    #[error("function code {code}: {second} collides with {first} (one kernel per code)")]
    Collision {
        /// The code.
        code: u8,
        /// The kernel given first.
        first: String,
        /// The kernel given second.
        second: String,
    },
}

impl FromStr for KernelSpec {
    type Err = PluginError;

    /// `CODE=PATH[:SYMBOL]`: a `:` after the path's last `/` starts the symbol.
    fn from_str(s: &str) -> Result<Self, PluginError> {
        let bad = |why: &str| PluginError::Spec {
            given: s.to_owned(),
            why: why.to_owned(),
        };
        let (code, rest) = s.split_once('=').ok_or_else(|| bad("no `=`"))?;
        let code = parse_code(code).map_err(|why| bad(&why))?;
        let file_start = rest.rfind('/').map_or(0, |i| i + 1);
        let (library, symbol) = match rest[file_start..].rfind(':') {
            Some(i) => (&rest[..file_start + i], &rest[file_start + i + 1..]),
            None => (rest, DEFAULT_SYMBOL),
        };
        if library.is_empty() {
            return Err(bad("no library path"));
        }
        check_symbol(symbol).map_err(|why| bad(&why))?;
        Ok(Self {
            code,
            library: PathBuf::from(library),
            symbol: symbol.to_owned(),
            name: None,
            timeout: None,
            init: None,
            fini: None,
            config: None,
            origin: format!("--kernel {s}"),
        })
    }
}

/// A function code, 1-127.
fn parse_code(text: &str) -> Result<FunctionCode, String> {
    text.trim()
        .parse::<u8>()
        .ok()
        .and_then(FunctionCode::new)
        .ok_or_else(|| format!("function code {text:?} is not 1-127"))
}

/// A C symbol: letters, digits and `_`, not starting with a digit.
fn check_symbol(symbol: &str) -> Result<(), String> {
    let ok = !symbol.is_empty()
        && !symbol.starts_with(|c: char| c.is_ascii_digit())
        && symbol
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("{symbol:?} is not a C symbol name"))
    }
}

/// What a server serves: the built-ins (unless left out), then each spec's kernel, loaded.
#[derive(Clone, Debug, Default)]
pub struct KernelSources {
    /// Serve the built-in kernels 1-3 (a loaded kernel at their code replaces them).
    pub builtins: bool,
    /// Kernels from the command line (kept across reloads).
    pub given: Vec<KernelSpec>,
    /// The kernels file (read again on every reload).
    pub file: Option<PathBuf>,
}

impl KernelSources {
    /// Reads the kernels file (if any) and loads every kernel: the registry to serve.
    pub fn load(&self) -> Result<KernelRegistry, PluginError> {
        let from_file = match &self.file {
            Some(path) => read_kernels_file(path)?,
            None => Vec::new(),
        };
        build(self.builtins, self.given.iter().chain(&from_file))
    }
}

/// Loads `specs` into a registry (with the built-ins first when asked); two specs for one
/// code are a [`PluginError::Collision`].
pub fn build<'a>(
    builtins: bool,
    specs: impl IntoIterator<Item = &'a KernelSpec>,
) -> Result<KernelRegistry, PluginError> {
    let mut registry = if builtins {
        KernelRegistry::builtin()
    } else {
        KernelRegistry::empty()
    };
    let mut origins: [Option<&str>; 128] = [None; 128];
    for spec in specs {
        let slot = &mut origins[usize::from(spec.code.get())];
        if let Some(first) = slot {
            return Err(PluginError::Collision {
                code: spec.code.get(),
                first: (*first).to_owned(),
                second: spec.origin.clone(),
            });
        }
        *slot = Some(&spec.origin);
        let kernel = load(spec)?;
        registry.insert(spec.code, spec.name(), kernel);
        registry.set_timeout(spec.code, spec.timeout);
        tracing::debug!(code = spec.code.get(), name = spec.name(), library = %spec.library.display(), "kernel loaded");
    }
    Ok(registry)
}

impl fmt::Display for KernelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={}:{}",
            self.code.get(),
            self.library.display(),
            self.symbol
        )
    }
}

/// `path` resolved against `base` (the kernels file's folder) when it is relative and names
/// a folder; a bare file name stays as it is (searched as `dlopen(3)` does).
fn resolve(base: &Path, path: &Path) -> PathBuf {
    if path.is_relative() && path.components().count() > 1 {
        base.join(path)
    } else {
        path.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_arguments_parse_with_and_without_a_symbol() {
        let s: KernelSpec = "7=./build/libscale.so:scale".parse().unwrap();
        assert_eq!(s.code.get(), 7);
        assert_eq!(s.library, Path::new("./build/libscale.so"));
        assert_eq!(s.symbol, "scale");
        assert_eq!(s.name(), "scale");
        let s: KernelSpec = "127=libk.so".parse().unwrap();
        assert_eq!(
            (s.library.to_str(), &*s.symbol),
            (Some("libk.so"), DEFAULT_SYMBOL)
        );
        // A colon in a folder's name is part of the path.
        let s: KernelSpec = "9=/opt/a:b/libk.so".parse().unwrap();
        assert_eq!(
            (s.library.to_str(), &*s.symbol),
            (Some("/opt/a:b/libk.so"), DEFAULT_SYMBOL)
        );
        for bad in [
            "7",
            "0=libk.so",
            "128=libk.so",
            "x=libk.so",
            "7=",
            "7=libk.so:",
            "7=libk.so:1x",
            "7=libk.so:a-b",
        ] {
            let e = bad.parse::<KernelSpec>().unwrap_err().to_string();
            assert!(e.contains("CODE=PATH[:SYMBOL]"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_missing_library_or_a_collision_is_a_clear_error() {
        let missing: KernelSpec = "7=/nonexistent/libk.so:scale".parse().unwrap();
        let device: KernelSpec = "7=/dev/zero:k".parse().unwrap();
        let e = build(true, [&device]).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let e = build(true, [&missing]).unwrap_err().to_string();
        assert!(
            e.contains("--kernel 7=/nonexistent/libk.so:scale")
                && e.contains("cannot load /nonexistent/libk.so"),
            "{e}"
        );
        // The C library is there on every machine: its `abs` is found, its `no_such` not.
        let libc: KernelSpec = "7=libc.so.6:no_such_kernel_symbol".parse().unwrap();
        let e = build(true, [&libc]).unwrap_err().to_string();
        assert!(e.contains("has no symbol `no_such_kernel_symbol`"), "{e}");
        let a: KernelSpec = "7=libc.so.6:abs".parse().unwrap();
        let b: KernelSpec = "7=libc.so.6:labs".parse().unwrap();
        let e = build(true, [&a, &b]).unwrap_err().to_string();
        assert!(
            e.contains(
                "function code 7: --kernel 7=libc.so.6:labs collides with --kernel 7=libc.so.6:abs"
            ),
            "{e}"
        );
    }

    #[test]
    fn relative_paths_with_a_folder_are_the_files_and_bare_names_are_searched() {
        let base = Path::new("/etc/naaice");
        assert_eq!(
            resolve(base, Path::new("lib/libk.so")),
            Path::new("/etc/naaice/lib/libk.so")
        );
        assert_eq!(resolve(base, Path::new("libk.so")), Path::new("libk.so"));
        assert_eq!(
            resolve(base, Path::new("/opt/libk.so")),
            Path::new("/opt/libk.so")
        );
    }
}
