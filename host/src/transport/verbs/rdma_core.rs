//! rdma-core, loaded at run time: `rdma-mummy-sys` opens `libibverbs.so.1` and
//! `librdmacm.so.1` when the program starts, and its entry points fail with `EOPNOTSUPP` when
//! a library is missing. [`check`] turns that state into a clear
//! [`TransportError::Unavailable`] before any verbs call is made.

use std::ffi::CStr;

use super::{Result, TransportError};

/// The libraries the verbs transport needs (their sonames, as `rdma-mummy-sys` opens them).
const LIBRARIES: [&CStr; 2] = [c"libibverbs.so.1", c"librdmacm.so.1"];

/// Ok when rdma-core was loaded; [`TransportError::Unavailable`] naming the missing library
/// otherwise.
pub(super) fn check() -> Result<()> {
    LIBRARIES.into_iter().try_for_each(loaded)
}

/// Whether the library `soname` is loaded in this process.
fn loaded(soname: &CStr) -> Result<()> {
    // SAFETY: `soname` is a NUL-terminated string; with RTLD_NOLOAD dlopen only looks the
    // library up among the loaded ones (it loads nothing and runs no initialiser).
    let handle = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return Err(TransportError::Unavailable(format!(
            "rdma-core is not installed: {} could not be loaded (install libibverbs1, \
             librdmacm1 and ibverbs-providers on Debian/Ubuntu, rdma-core on RHEL/Rocky/SUSE); \
             {}",
            soname.to_string_lossy(),
            super::SOFTWARE_HINT
        )));
    }
    // SAFETY: `handle` came from the dlopen above; closing it drops only the reference it
    // took (the library stays loaded by `rdma-mummy-sys`).
    unsafe { libc::dlclose(handle) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::transport::Transport;
    use crate::transport::verbs::{VerbsTransport, device_names};

    /// Set in the child process that runs with rdma-core hidden.
    const HIDDEN: &str = "NAAICE_TEST_RDMA_CORE_HIDDEN";

    #[test]
    fn a_library_that_is_not_loaded_is_unavailable() {
        let e = loaded(c"libnaaice-no-such-library.so.1").unwrap_err();
        assert!(
            matches!(&e, TransportError::Unavailable(m) if m.contains("libnaaice-no-such-library.so.1")),
            "{e:?}"
        );
    }

    /// The files the dynamic loader opened for rdma-core in this process.
    fn loaded_files() -> Vec<String> {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
        let mut files: Vec<String> = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .filter(|p| p.contains("/libibverbs.so") || p.contains("/librdmacm.so"))
            .map(str::to_owned)
            .collect();
        files.sort();
        files.dedup();
        files
    }

    /// Without rdma-core on the machine, connect and listen report `Unavailable` naming the
    /// library, and there are no devices. The test runs itself again in a private mount
    /// namespace (`unshare`) where the rdma-core library files are replaced by `/dev/null`.
    #[test]
    fn without_rdma_core_the_transport_is_unavailable() {
        let t = VerbsTransport::default();
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        if std::env::var_os(HIDDEN).is_some() {
            assert!(loaded_files().is_empty(), "rdma-core still loaded");
            let deadline = Instant::now() + Duration::from_secs(1);
            assert_eq!(device_names().unwrap(), Vec::<String>::new());
            let errors = [
                t.listen(any).map(drop).unwrap_err(),
                t.connect(any, None, deadline).map(drop).unwrap_err(),
            ];
            for e in errors {
                assert!(
                    matches!(&e, TransportError::Unavailable(m) if m.contains("libibverbs.so.1")),
                    "{e:?}"
                );
            }
            return;
        }
        let files = loaded_files();
        if files.is_empty() {
            // This machine has no rdma-core: the transport must say so directly.
            assert!(matches!(
                t.listen(any).map(drop),
                Err(TransportError::Unavailable(_))
            ));
            return;
        }
        let mounts: String = files
            .iter()
            .map(|f| format!("mount --bind /dev/null '{f}' && "))
            .collect();
        let exe = std::env::current_exe().unwrap();
        let name =
            "transport::verbs::rdma_core::tests::without_rdma_core_the_transport_is_unavailable";
        // Root can unshare the mount namespace directly; others need a user namespace.
        let unshare = |user_ns: bool| {
            let mut cmd = Command::new("unshare");
            if user_ns {
                cmd.args(["--user", "--map-root-user"]);
            }
            cmd.arg("--mount");
            cmd
        };
        let works = |user_ns: bool| {
            unshare(user_ns)
                .arg("true")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let Some(user_ns) = [false, true].into_iter().find(|&u| works(u)) else {
            // Containers without CAP_SYS_ADMIN or user namespaces cannot hide files; CI can.
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must be able to run `unshare --mount` (root) to hide rdma-core"
            );
            println!("SKIP: cannot create a mount namespace (unshare) to hide rdma-core");
            return;
        };
        let out = unshare(user_ns)
            .args(["sh", "-c"])
            .arg(format!(
                "{mounts}exec \"$0\" --exact {name} --test-threads 1"
            ))
            .arg(&exe)
            .env(HIDDEN, "1")
            .output()
            .expect("run the test with rdma-core hidden");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "child with rdma-core hidden failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
