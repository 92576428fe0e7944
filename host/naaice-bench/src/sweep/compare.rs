//! A reference CSV to compare with (spec §8.2: `byte_length,setup_time,transfer_time`, or the
//! middleware's `byte_length,transfer_time`; seconds, several rows per size).

use std::collections::BTreeMap;
use std::path::Path;

use crate::Error;

/// The median `transfer_time` (seconds) per size of a reference CSV.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reference {
    /// The file's name, for legends.
    pub label: String,
    /// Size → median transfer_time in seconds.
    pub transfer: BTreeMap<u64, f64>,
}

impl Reference {
    /// Reads `path`; every row must have a positive size and a finite, positive time.
    pub(crate) fn read(path: &Path) -> Result<Self, Error> {
        let file =
            std::fs::File::open(path).map_err(|e| format!("--compare {}: {e}", path.display()))?;
        let label = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Self::parse(file, label).map_err(|e| format!("--compare {}: {e}", path.display()).into())
    }

    /// Parses CSV text with a header naming `byte_length` and `transfer_time`.
    pub(crate) fn parse(reader: impl std::io::Read, label: String) -> Result<Self, Error> {
        let mut csv = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(reader);
        let headers = csv.headers()?.clone();
        let column = |name: &str| {
            headers
                .iter()
                .position(|h| h == name)
                .ok_or_else(|| format!("no column {name:?} in the header"))
        };
        let (size_col, time_col) = (column("byte_length")?, column("transfer_time")?);
        let mut times: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        for (i, record) in csv.records().enumerate() {
            let record = record?;
            let line = i + 2;
            let field = |c: usize| record.get(c).unwrap_or("");
            let size: u64 = field(size_col)
                .parse()
                .map_err(|e| format!("line {line}: byte_length: {e}"))?;
            let time: f64 = field(time_col)
                .parse()
                .map_err(|e| format!("line {line}: transfer_time: {e}"))?;
            if size == 0 || !time.is_finite() || time <= 0.0 {
                return Err(
                    format!("line {line}: byte_length {size}, transfer_time {time}").into(),
                );
            }
            times.entry(size).or_default().push(time);
        }
        if times.is_empty() {
            return Err("no rows".into());
        }
        let transfer = times
            .into_iter()
            .map(|(size, mut v)| {
                v.sort_by(f64::total_cmp);
                let n = v.len();
                let median = if n % 2 == 1 {
                    v[n / 2]
                } else {
                    (v[n / 2 - 1] + v[n / 2]) / 2.0
                };
                (size, median)
            })
            .collect();
        Ok(Self { label, transfer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_per_size() {
        let text = "byte_length,setup_time,transfer_time\n1,0.1,0.000020\n1,0.1,0.000030\n\
                    1,0.1,0.000040\n4,0.1,0.000050\n4,0.1,0.000070\n";
        let r = Reference::parse(text.as_bytes(), "ref".into()).expect("parses");
        assert_eq!(r.transfer.len(), 2);
        assert!((r.transfer[&1] - 30e-6).abs() < 1e-12);
        assert!((r.transfer[&4] - 60e-6).abs() < 1e-12);
        let mw = Reference::parse("byte_length,transfer_time\n8,0.5\n".as_bytes(), "mw".into());
        assert_eq!(mw.expect("middleware format").transfer[&8], 0.5);
    }

    #[test]
    fn bad_files_are_errors() {
        for text in [
            "size,time\n1,2\n",
            "byte_length,transfer_time\n",
            "byte_length,transfer_time\nx,1\n",
            "byte_length,transfer_time\n1,-1\n",
            "byte_length,transfer_time\n1,NaN\n",
            "byte_length,transfer_time\n0,1\n",
        ] {
            assert!(
                Reference::parse(text.as_bytes(), "bad".into()).is_err(),
                "{text}"
            );
        }
    }
}
