//! The library's log records in Python's `logging`.
//!
//! The library logs through `tracing`. At import, this module installs a `tracing` subscriber
//! filtered by `NAAICE_LOG` (the same filter syntax and default, `warn`, as the C library's
//! messages on stderr) whose formatted events become `log` records, and
//! [pyo3-log](https://docs.rs/pyo3-log) hands those to Python's `logging`: logger
//! `naaice.<module>` (the Rust module path with `.`, so the `naaice` logger sees them all),
//! levels mapped to `ERROR`, `WARNING`, `INFO`, `DEBUG` and 5 for trace. Python's own levels
//! and handlers then apply as to any logger.

use std::io::Write;

use pyo3::prelude::*;
use tracing_subscriber::fmt::MakeWriter;

/// The variable with the log filter.
const VAR: &str = "NAAICE_LOG";

/// Installs the bridge (once per process; a second import finds it installed).
pub(crate) fn init(py: Python<'_>) -> PyResult<()> {
    let logger =
        pyo3_log::Logger::new(py, pyo3_log::Caching::Loggers)?.filter(log::LevelFilter::Trace);
    if logger.install().is_err() {
        return Ok(()); // installed already
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env(VAR)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(ToLog)
        .without_time()
        .with_level(false)
        .with_target(false)
        .with_ansi(false)
        .finish();
    // A subscriber set already (not expected in an extension module) is kept.
    let _ = tracing::subscriber::set_global_default(subscriber);
    Ok(())
}

/// Makes one [`Record`] per formatted event (the fmt layer writes an event at once).
struct ToLog;

/// One event's text, logged through `log` when dropped.
struct Record {
    level: log::Level,
    target: String,
    text: Vec<u8>,
}

impl<'a> MakeWriter<'a> for ToLog {
    type Writer = Record;

    fn make_writer(&'a self) -> Record {
        Record {
            level: log::Level::Info,
            target: "naaice".to_owned(),
            text: Vec::new(),
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Record {
        let level = match *meta.level() {
            tracing::Level::ERROR => log::Level::Error,
            tracing::Level::WARN => log::Level::Warn,
            tracing::Level::INFO => log::Level::Info,
            tracing::Level::DEBUG => log::Level::Debug,
            tracing::Level::TRACE => log::Level::Trace,
        };
        Record {
            level,
            target: meta.target().to_owned(),
            text: Vec::new(),
        }
    }
}

impl Write for Record {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.text);
        let text = text.trim_end();
        if text.is_empty() {
            return;
        }
        log::logger().log(
            &log::Record::builder()
                .level(self.level)
                .target(&self.target)
                .args(format_args!("{text}"))
                .build(),
        );
    }
}
