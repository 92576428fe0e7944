//! Loading a kernel from a shared library (`dlopen`, `dlsym`) and its optional state pair.

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use libloading::Library;

use super::{KernelSpec, PluginError};
use crate::swnaa::c_kernel::{CKernel, CKernelFn};
use crate::swnaa::kernel::Kernel;

/// `int init(const char *config, void **user_data)`.
type InitFn = unsafe extern "C" fn(config: *const c_char, user_data: *mut *mut c_void) -> c_int;
/// `void fini(void *user_data)`.
type FiniFn = unsafe extern "C" fn(user_data: *mut c_void);

/// A loaded library with the state its init made; fini runs (then the library is closed)
/// when the last kernel using it is gone.
struct Loaded {
    fini: Option<FiniFn>,
    user_data: *mut c_void,
    /// Closed after `fini` ran (fields drop after `Drop::drop`).
    _library: Library,
}

// SAFETY: `user_data` is only handed to the kernel and to fini, which the plugin's author
// made thread-safe (the kernel contract: called from several threads at once); the library
// handle itself is thread-safe (dlclose may run on any thread).
unsafe impl Send for Loaded {}
// SAFETY: see `Send`; `Loaded` has no interior mutability.
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        if let Some(fini) = self.fini {
            // SAFETY: `fini` was looked up with the documented `void fini(void *)` signature
            // and gets the pointer its init stored, once, after the last call of the kernel
            // (the kernel holds this value alive).
            unsafe { fini(self.user_data) };
        }
    }
}

/// Loads `spec`'s kernel: opens the library, finds the kernel (and the init/fini pair), runs
/// init.
pub(super) fn load(spec: &KernelSpec) -> Result<Arc<dyn Kernel>, PluginError> {
    let origin = || spec.origin.clone();
    let load_error = |why: String| PluginError::Library {
        origin: origin(),
        library: spec.library.clone(),
        why,
    };
    // A file (not a bare name searched by the loader) is loaded from a private copy: the
    // loader hands back a library already open under the same name, so a library rebuilt in
    // place would otherwise keep its old code across reloads.
    let copy = if spec.library.components().count() > 1 {
        Some(PrivateCopy::of(&spec.library).map_err(|e| load_error(e.to_string()))?)
    } else {
        None
    };
    let path = copy
        .as_ref()
        .map_or(spec.library.as_path(), |c| c.path.as_path());
    // SAFETY: loading a library runs its initialisers: the server's operator chose this
    // library to run in the server (the docs say to run untrusted kernels in a separate
    // server).
    let library = unsafe { Library::new(path) }.map_err(|e| {
        // The loader's message names the copy: name the library instead.
        load_error(e.to_string().replace(
            &path.display().to_string(),
            &spec.library.display().to_string(),
        ))
    })?;
    // Mapped now: the copy's file is not needed any more.
    drop(copy);
    let symbol_error = |symbol: &str, e: libloading::Error| PluginError::Symbol {
        origin: origin(),
        library: spec.library.clone(),
        symbol: symbol.to_owned(),
        why: e.to_string(),
    };
    // SAFETY: the symbol is read as a function with the `naa_swnaa_kernel` signature, the
    // contract of `--kernel` (docs/swnaa.md); the pointer is kept only together with the
    // library (`Loaded`), which stays open while the kernel exists.
    let run: CKernelFn = unsafe { library.get::<CKernelFn>(spec.symbol.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| symbol_error(&spec.symbol, e))?;
    let init: Option<InitFn> = optional(&library, spec.init.as_deref(), &spec.symbol, "init")
        .map_err(|(s, e)| symbol_error(&s, e))?;
    let fini: Option<FiniFn> = optional(&library, spec.fini.as_deref(), &spec.symbol, "fini")
        .map_err(|(s, e)| symbol_error(&s, e))?;
    let mut user_data: *mut c_void = std::ptr::null_mut();
    if let Some(init) = init {
        let config = spec
            .config
            .as_deref()
            .map(CString::new)
            .transpose()
            .map_err(|_| PluginError::File {
                path: spec.library.clone(),
                why: "config holds a NUL byte".to_owned(),
            })?;
        let config_ptr = config.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        // SAFETY: `init` has the documented `int init(const char *, void **)` signature;
        // `config_ptr` is NULL or a NUL-terminated string alive for the call, `user_data` a
        // valid place for one pointer.
        let status = unsafe { init(config_ptr, &mut user_data) };
        if status != 0 {
            return Err(PluginError::Init {
                origin: origin(),
                library: spec.library.clone(),
                symbol: spec
                    .init
                    .clone()
                    .unwrap_or_else(|| format!("{}_init", spec.symbol)),
                status,
            });
        }
    }
    let loaded: Arc<dyn std::any::Any + Send + Sync> = Arc::new(Loaded {
        fini,
        user_data,
        _library: library,
    });
    // SAFETY: `run` has the kernel signature (see above) and stays valid while `loaded`
    // (the open library) lives, which the kernel owns; `user_data` is its init's state,
    // released by fini only when the kernel is gone.
    let kernel = unsafe { CKernel::new(run, user_data, Some(loaded)) };
    Ok(Arc::new(kernel))
}

/// A copy of a library file in a folder only this user can write (mode 0700, a new one per
/// copy), removed on drop.
struct PrivateCopy {
    path: PathBuf,
    dir: PathBuf,
}

impl PrivateCopy {
    fn of(library: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        // A device or a pipe would be copied without end.
        if !std::fs::metadata(library)?.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let name = library.file_name().unwrap_or(library.as_os_str());
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "naaice-kernel-{}-{}-{stamp}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        // Fails if it exists: nobody else prepared it.
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let path = dir.join(name);
        let copy = Self { path, dir };
        std::fs::copy(library, &copy.path)?;
        Ok(copy)
    }
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The init or fini function: the one named (an error if missing), else `SYMBOL_{which}`
/// where the library has it.
fn optional<F: Copy>(
    library: &Library,
    named: Option<&str>,
    symbol: &str,
    which: &str,
) -> Result<Option<F>, (String, libloading::Error)> {
    let (name, required) = match named {
        Some(n) => (n.to_owned(), true),
        None => (format!("{symbol}_{which}"), false),
    };
    // SAFETY: read as the documented init/fini signature (`F`); kept only with the library.
    match unsafe { library.get::<F>(name.as_bytes()) } {
        Ok(f) => Ok(Some(*f)),
        Err(e) if required => Err((name, e)),
        Err(_) => Ok(None),
    }
}
