//! What `--clients` writes: `clients.csv` and `clients.json` (a row per mode, N and size,
//! beside the raw TCP echo of the same N and size), `isolation.csv`, and a table.

use std::fmt::Write as _;

use crate::clients::isolation::Isolation;
use crate::clients::point::Point;

/// One row: a point of our RPCs and the raw echo at the same N and size.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// `threads` (clients are threads of one process), `processes`, or `overlap` (one thread
    /// driving N handles with `wait_any`).
    pub mode: &'static str,
    /// `rust` or `c`.
    pub api: &'static str,
    /// Bytes each way per RPC.
    pub size: u64,
    /// Our RPCs.
    pub rpc: Point,
    /// The raw TCP echo (software transport on this machine only).
    pub raw: Option<Point>,
}

/// A value of a column.
enum Cell {
    Text(String),
    Int(Option<u64>),
    Num(Option<f64>),
}

/// A number with three significant decimals at least (`29415.3`, `14.912`, `0.004187`).
fn number(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.6}")
    }
}

impl Cell {
    fn csv(&self) -> String {
        match self {
            Self::Text(s) => s.clone(),
            Self::Int(n) => n.map_or_else(String::new, |n| n.to_string()),
            Self::Num(v) => v.filter(|v| v.is_finite()).map_or_else(String::new, number),
        }
    }

    fn json(&self) -> String {
        match self {
            Self::Text(s) => format!("{s:?}"),
            Self::Int(n) => n.map_or_else(|| "null".to_owned(), |n| n.to_string()),
            Self::Num(v) => v
                .filter(|v| v.is_finite())
                .map_or_else(|| "null".to_owned(), number),
        }
    }
}

/// Microseconds of seconds.
fn us(v: Option<f64>) -> Cell {
    Cell::Num(v.map(|v| v * 1e6))
}

/// The usage columns of a side: CPU µs, voluntary and involuntary switches per RPC.
fn usage(prefix: &str, u: Option<(f64, f64, f64)>) -> [(String, Cell); 3] {
    [
        (format!("{prefix}cpu_us_per_rpc"), us(u.map(|u| u.0))),
        (format!("{prefix}vcsw_per_rpc"), Cell::Num(u.map(|u| u.1))),
        (format!("{prefix}ivcsw_per_rpc"), Cell::Num(u.map(|u| u.2))),
    ]
}

/// The columns of a point, names prefixed.
fn point(prefix: &str, p: Option<&Point>, client: &str, server: &str) -> Vec<(String, Cell)> {
    let mut c = vec![
        (format!("{prefix}rpcs"), Cell::Int(p.map(|p| p.rpcs))),
        (format!("{prefix}rpc_per_s"), Cell::Num(p.map(|p| p.rate))),
        (
            format!("{prefix}GBps"),
            Cell::Num(p.map(|p| p.bandwidth / 1e9)),
        ),
        (format!("{prefix}p50_us"), us(p.and_then(|p| p.p50))),
        (format!("{prefix}p99_us"), us(p.and_then(|p| p.p99))),
        (
            format!("{prefix}slowest_vs_mean"),
            Cell::Num(p.and_then(|p| p.fairness)),
        ),
    ];
    c.extend(usage(
        &format!("{prefix}{client}_"),
        p.and_then(|p| p.client),
    ));
    c.extend(usage(
        &format!("{prefix}{server}_"),
        p.and_then(|p| p.server),
    ));
    c
}

/// Every column of a row, in order.
fn columns(r: &Row) -> Vec<(String, Cell)> {
    let mut c = vec![
        ("mode".to_owned(), Cell::Text(r.mode.to_owned())),
        ("api".to_owned(), Cell::Text(r.api.to_owned())),
        ("clients".to_owned(), Cell::Int(Some(r.rpc.clients as u64))),
        ("bytes".to_owned(), Cell::Int(Some(r.size))),
    ];
    c.extend(point("", Some(&r.rpc), "client", "naa"));
    c.extend(point("raw_", r.raw.as_ref(), "client", "server"));
    let ratio = r
        .raw
        .filter(|raw| raw.rate > 0.0)
        .map(|raw| r.rpc.rate / raw.rate);
    c.push(("rpc_vs_raw".to_owned(), Cell::Num(ratio)));
    c
}

/// The columns of an isolation row.
fn isolation_columns(i: &Isolation) -> Vec<(String, Cell)> {
    vec![
        ("mode".to_owned(), Cell::Text(i.mode.to_owned())),
        ("api".to_owned(), Cell::Text(i.api.to_owned())),
        ("clients".to_owned(), Cell::Int(Some(i.clients as u64))),
        ("small_bytes".to_owned(), Cell::Int(Some(i.small_size))),
        ("big_bytes".to_owned(), Cell::Int(Some(i.big_size))),
        ("small_p99_alone_us".to_owned(), us(i.alone.p99)),
        ("small_p99_with_big_us".to_owned(), us(i.with_big.p99)),
        (
            "small_rpc_per_s_alone".to_owned(),
            Cell::Num(Some(i.alone.rate)),
        ),
        (
            "small_rpc_per_s_with_big".to_owned(),
            Cell::Num(Some(i.with_big.rate)),
        ),
        ("big_p50_us".to_owned(), us(i.big.p50)),
        ("big_rpcs".to_owned(), Cell::Int(Some(i.big.rpcs))),
        ("p99_rise_vs_big".to_owned(), Cell::Num(i.rise_over_big())),
    ]
}

fn csv(comment: &str, rows: &[Vec<(String, Cell)>]) -> String {
    let mut s = String::new();
    for line in comment.lines() {
        let _ = writeln!(s, "# {line}");
    }
    if let Some(first) = rows.first() {
        let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
        let _ = writeln!(s, "{}", names.join(","));
    }
    for row in rows {
        let cells: Vec<String> = row.iter().map(|(_, c)| c.csv()).collect();
        let _ = writeln!(s, "{}", cells.join(","));
    }
    s
}

/// `clients.csv`: `#` lines of `comment`, the header, a line per row.
pub(crate) fn clients_csv(rows: &[Row], comment: &str) -> String {
    csv(comment, &rows.iter().map(columns).collect::<Vec<_>>())
}

/// `isolation.csv`.
pub(crate) fn isolation_csv(rows: &[Isolation], comment: &str) -> String {
    csv(
        comment,
        &rows.iter().map(isolation_columns).collect::<Vec<_>>(),
    )
}

fn json_objects(rows: Vec<Vec<(String, Cell)>>) -> String {
    let objects: Vec<String> = rows
        .iter()
        .map(|row| {
            let fields: Vec<String> = row
                .iter()
                .map(|(n, c)| format!("{n:?}: {}", c.json()))
                .collect();
            format!("    {{{}}}", fields.join(", "))
        })
        .collect();
    format!("[\n{}\n  ]", objects.join(",\n"))
}

/// `clients.json`: what was measured (`about`), the rows and the isolation rows.
pub(crate) fn json(about: &[(&str, String)], rows: &[Row], isolation: &[Isolation]) -> String {
    let mut s = String::from("{\n");
    for (k, v) in about {
        // Numbers stay numbers; anything else is a string.
        match v.parse::<f64>() {
            Ok(n) if n.is_finite() => {
                let _ = writeln!(s, "  {k:?}: {v},");
            }
            _ => {
                let _ = writeln!(s, "  {k:?}: {v:?},");
            }
        }
    }
    let _ = writeln!(
        s,
        "  \"rows\": {},",
        json_objects(rows.iter().map(columns).collect())
    );
    let _ = writeln!(
        s,
        "  \"isolation\": {}",
        json_objects(isolation.iter().map(isolation_columns).collect())
    );
    s.push_str("}\n");
    s
}

/// A line of the table for people.
pub(crate) fn table_line(r: &Row) -> String {
    let f =
        |v: Option<f64>, scale: f64| v.map_or_else(|| "-".into(), |v| format!("{:.1}", v * scale));
    let ratio = r
        .raw
        .filter(|raw| raw.rate > 0.0)
        .map(|raw| r.rpc.rate / raw.rate);
    format!(
        "{:>9} {:>4} {:>3} {:>9} | {:>10.0} {:>7.3} {:>8} {:>8} {:>5} {:>7} {:>7} {:>6} | {:>10} {:>8} {:>5}",
        r.mode,
        r.api,
        r.rpc.clients,
        r.size,
        r.rpc.rate,
        r.rpc.bandwidth / 1e9,
        f(r.rpc.p50, 1e6),
        f(r.rpc.p99, 1e6),
        r.rpc
            .fairness
            .map_or_else(|| "-".into(), |v| format!("{v:.2}")),
        f(r.rpc.client.map(|u| u.0), 1e6),
        f(r.rpc.server.map(|u| u.0), 1e6),
        f(r.rpc.client.map(|u| u.1), 1.0),
        r.raw
            .map_or_else(|| "-".into(), |p| format!("{:.0}", p.rate)),
        f(
            r.raw
                .and_then(|p| p.client.zip(p.server))
                .map(|(c, s)| c.0 + s.0),
            1e6
        ),
        ratio.map_or_else(|| "-".into(), |v| format!("{v:.2}")),
    )
}

/// The table's header.
pub(crate) const TABLE_HEADER: &str = "     mode  api   N     bytes |      RPC/s    GB/s  p50 µs   p99 µs  fair cli cpu naa cpu cli cs |  raw RPC/s  raw cpu ratio";

/// What the table's columns mean.
pub(crate) const TABLE_LEGEND: &str = "(fair = slowest client's rate / mean rate; cpu = µs of CPU per RPC of the \
client processes (cli) and the NAA (naa); cli cs = voluntary context switches per RPC of the \
clients; raw cpu = both sides of the raw echo per round trip; ratio = RPC/s / raw RPC/s)";
