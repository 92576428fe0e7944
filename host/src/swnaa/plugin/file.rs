//! The kernels file (`naaice-swnaa --kernels FILE`): TOML, one `[[kernel]]` table each.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::{KernelSpec, PluginError, check_symbol, parse_code, resolve};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KernelsFile {
    #[serde(default)]
    kernel: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    code: i64,
    library: PathBuf,
    #[serde(default)]
    symbol: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    init: Option<String>,
    #[serde(default)]
    fini: Option<String>,
    #[serde(default)]
    config: Option<String>,
}

/// Reads the kernels of a kernels file (not loaded yet); relative library paths with a
/// folder count from the file's folder.
pub fn read_kernels_file(path: &Path) -> Result<Vec<KernelSpec>, PluginError> {
    let bad = |why: String| PluginError::File {
        path: path.to_owned(),
        why,
    };
    let text = read_bounded(path).map_err(bad)?;
    let file: KernelsFile = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    file.kernel
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let at = |why: String| bad(format!("kernel {} (code {}): {why}", i + 1, e.code));
            let code = u8::try_from(e.code)
                .map_err(|_| format!("function code {} is not 1-127", e.code))
                .and_then(|c| parse_code(&c.to_string()))
                .map_err(at)?;
            let symbol = e
                .symbol
                .clone()
                .unwrap_or_else(|| super::DEFAULT_SYMBOL.to_owned());
            for s in [Some(&symbol), e.init.as_ref(), e.fini.as_ref()]
                .into_iter()
                .flatten()
            {
                check_symbol(s).map_err(at)?;
            }
            let timeout = e
                .timeout
                .as_deref()
                .map(|t| crate::units::parse_duration(t, Duration::from_secs(1)))
                .transpose()
                .map_err(|why| at(format!("timeout: {why}")))?;
            if timeout == Some(Duration::ZERO) {
                return Err(at("timeout must be more than 0".to_owned()));
            }
            if e.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
                return Err(at("name is empty".to_owned()));
            }
            Ok(KernelSpec {
                code,
                library: resolve(base, &e.library),
                symbol,
                name: e.name,
                timeout,
                init: e.init,
                fini: e.fini,
                config: e.config,
                origin: format!("{} kernel {}", path.display(), i + 1),
            })
        })
        .collect()
}

/// Longest kernels file read (a file of 127 kernels is a few KiB).
const MAX_FILE: u64 = 1 << 20;

/// The file's text: a regular file of at most [`MAX_FILE`] bytes.
fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    if !file.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err("not a regular file".to_owned());
    }
    let mut text = String::new();
    file.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!("larger than {} KiB", MAX_FILE >> 10));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kernels.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_kernels_file_reads_with_defaults_and_paths_from_its_folder() {
        let (dir, path) = write(
            r#"
[[kernel]]
code = 7
library = "build/libscale.so"
symbol = "scale"
name = "scale by 2"
timeout = "30s"
config = "factor=2"

[[kernel]]
code = 9
library = "libm.so.6"
"#,
        );
        let specs = read_kernels_file(&path).unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].library, dir.path().join("build/libscale.so"));
        assert_eq!(
            (specs[0].name(), specs[0].timeout),
            ("scale by 2", Some(Duration::from_secs(30)))
        );
        assert_eq!(specs[0].config.as_deref(), Some("factor=2"));
        assert_eq!(specs[1].library, Path::new("libm.so.6"));
        assert_eq!(
            (specs[1].symbol.as_str(), specs[1].name()),
            ("naa_kernel", "naa_kernel")
        );
        assert!(
            specs[1].origin.ends_with("kernels.toml kernel 2"),
            "{}",
            specs[1].origin
        );
    }

    #[test]
    fn mistakes_in_a_kernels_file_are_named() {
        for (text, expect) in [
            (
                "[[kernel]]\ncode = 0\nlibrary = \"a.so\"",
                "kernel 1 (code 0): function code",
            ),
            ("[[kernel]]\ncode = 300\nlibrary = \"a.so\"", "is not 1-127"),
            (
                "[[kernel]]\ncode = 7\nlibrary = \"a.so\"\nsymbol = \"a b\"",
                "is not a C symbol",
            ),
            (
                "[[kernel]]\ncode = 7\nlibrary = \"a.so\"\ntimeout = \"soon\"",
                "timeout:",
            ),
            (
                "[[kernel]]\ncode = 7\nlibrary = \"a.so\"\ntimeout = \"0s\"",
                "more than 0",
            ),
            (
                "[[kernel]]\ncode = 7\nlibary = \"a.so\"",
                "unknown field `libary`",
            ),
            ("[[kernel]]\ncode = 7", "missing field `library`"),
            ("kernel = 3", "invalid type"),
        ] {
            let (_dir, path) = write(text);
            let e = read_kernels_file(&path).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("kernels file {}", path.display())),
                "{e}"
            );
            assert!(e.contains(expect), "{text:?}: {e}");
        }
        let e = read_kernels_file(Path::new("/nonexistent/kernels.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/kernels.toml"), "{e}");
        // A device would be read without end.
        let e = read_kernels_file(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let (_dir, big) = write(&"# padding\n".repeat(200_000));
        let e = read_kernels_file(&big).unwrap_err().to_string();
        assert!(e.contains("larger than 1024 KiB"), "{e}");
    }
}
