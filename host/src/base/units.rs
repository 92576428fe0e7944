//! Durations and sizes as people type them on command lines and in environment variables
//! (`500ms`, `2s`, `1m 30s`; `4GiB`, `64 KiB`, `1500`), and sizes as people read them in logs.
//! Parsing is [`humantime`]'s and [`bytesize`]'s; a bare number keeps the unit its option
//! always had, so existing scripts keep working.

use std::fmt;
use std::time::Duration;

/// Parses a duration: a number with a unit (`500ms`, `10s`, `2m`, `1h 30m`, `250us`), or a
/// bare number (fractions allowed) counted in `bare` units (e.g. seconds).
pub fn parse_duration(text: &str, bare: Duration) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(n) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(n * bare.as_secs_f64()).map_err(|_| {
            format!("{t:?} is not a duration (a non-negative number, or with a unit: 500ms, 10s)")
        });
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{t:?} is not a duration ({e}; for example 500ms, 10s, 2m)"))
}

/// Parses a size in bytes: a bare number of bytes, or a number with a unit (`64KiB`,
/// `4 GiB`, `1.5MiB`; `kB`, `MB`, `GB` are powers of 1000).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    t.parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("{t:?} is not a size ({e}; for example 4096, 64KiB, 4GiB)"))
}

/// A size for people: `4.0 GiB`, `512 B` (binary units).
pub fn size(bytes: u64) -> impl fmt::Display {
    bytesize::ByteSize::b(bytes).display().iec()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn durations() {
        let d = |t| parse_duration(t, SECOND);
        assert_eq!(d("10"), Ok(Duration::from_secs(10)));
        assert_eq!(d(" 0.5 "), Ok(Duration::from_millis(500)));
        assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(d("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(d("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(
            parse_duration("250", Duration::from_micros(1)),
            Ok(Duration::from_micros(250))
        );
        for bad in ["-1", "soon", "10 parsecs", "inf", ""] {
            let err = d(bad).unwrap_err();
            assert!(err.contains("not a duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("4 GiB"), Ok(4 << 30));
        assert_eq!(parse_size("1.5MiB"), Ok(3 << 19));
        assert_eq!(parse_size("2kB"), Ok(2000));
        for bad in ["-1", "lots", "4 parsecs", ""] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.contains("not a size"), "{bad}: {err}");
        }
        assert_eq!(size(4 << 30).to_string(), "4.0 GiB");
        assert_eq!(size(512).to_string(), "512 B");
    }
}
