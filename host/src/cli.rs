//! The configuration reference, generated from the code so that it cannot drift: the
//! Markdown table of the library's environment variables ([`variables_markdown`]) and, with
//! the cargo feature `cli` (what the binaries use), man pages with the sections people look
//! for (ENVIRONMENT, EXIT STATUS, EXAMPLES, SEE ALSO) and the Markdown table of a binary's
//! options, both from its clap command. `docs/configuration.md` holds these tables between
//! `<!-- BEGIN name -->` and `<!-- END name -->` markers; tests compare them with
//! [`check_section`] (`NAAICE_BLESS=1` rewrites them).
//!
//! It also checks log filters ([`log_filter`]): the value of `NAAICE_LOG` and of the
//! binaries' `--log`, so that a typo is an error instead of a filter that selects nothing.

use std::io::Write;

#[cfg(feature = "cli")]
use clap::Command;
#[cfg(feature = "cli")]
use roff::{Roff, bold, italic, roman};

use crate::discovery::environment::VARIABLES;

/// The targets a log filter may name: the crates of naaice-rs that log (a filter's target is
/// one of these, optionally followed by `::module`).
pub const LOG_TARGETS: &[&str] = &[
    "naaice",
    "naaice_core",
    "naaice_ap2",
    "naaice_swnaa",
    "naaice_bench",
    "naaice_info",
];

/// The levels a log filter may name (`tracing`'s; case does not matter, `0` to `5` too).
pub const LOG_LEVELS: &[&str] = &["error", "warn", "info", "debug", "trace", "off"];

/// The forms a log filter takes, for error messages and documentation.
pub const LOG_FILTER_FORMS: &str = "a level (error, warn, info, debug, trace, off) or \
    comma-separated directives TARGET=LEVEL and LEVEL, whose targets are naaice crates \
    (naaice, naaice_core, naaice_ap2, naaice_swnaa, naaice_bench, naaice_info, each optionally \
    followed by ::module), e.g. naaice=debug,warn";

/// A log filter ([`log_filter`]) that is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a log filter: {reason}; expected {LOG_FILTER_FORMS}")]
pub struct LogFilterError {
    /// The filter as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Checks a log filter (the value of `NAAICE_LOG` or `--log`) and returns it normalised
/// (each directive trimmed, empty ones dropped, levels in lower case), ready for
/// `tracing_subscriber::EnvFilter`. Accepted: the subset of `EnvFilter`'s syntax that selects
/// naaice's messages: directives `LEVEL`, `TARGET`, `TARGET=LEVEL`, where a target is one of
/// [`LOG_TARGETS`] (optionally followed by `::module`) and may carry a span filter
/// (`TARGET[span]=LEVEL`). `EnvFilter` itself takes any word as a target, so `degub` or
/// `verbose` would select nothing and silence every message; here they are errors, with the
/// nearest level or target suggested.
pub fn log_filter(text: &str) -> Result<String, LogFilterError> {
    let bad = |reason: String| LogFilterError {
        text: text.to_owned(),
        reason,
    };
    let mut directives = Vec::new();
    for raw in text.split(',') {
        let directive = raw.trim();
        if directive.is_empty() {
            continue;
        }
        directives.push(log_directive(directive).map_err(bad)?);
    }
    if directives.is_empty() {
        return Err(bad("it is empty".into()));
    }
    Ok(directives.join(","))
}

/// [`log_filter`] as a command-line value parser (`--log`, `NAAICE_LOG`): the normalised
/// filter, which `tracing_subscriber::EnvFilter` takes as well, or the message of a
/// command-line error (clap exits with status 2).
#[cfg(feature = "cli")]
pub fn log_filter_arg(text: &str) -> Result<String, String> {
    let filter = log_filter(text).map_err(|e| e.to_string())?;
    tracing_subscriber::EnvFilter::try_new(&filter)
        .map(|_| filter)
        .map_err(|e| format!("{text:?} is not a log filter: {e}"))
}

/// One directive of [`log_filter`], normalised, or why it is not accepted.
fn log_directive(directive: &str) -> Result<String, String> {
    // The level follows the last '=' outside a span filter's brackets.
    let span_end = directive.rfind(']').map_or(0, |i| i + 1);
    let (selector, level) = match directive[span_end..].find('=') {
        Some(i) => (
            directive[..span_end + i].trim(),
            Some(directive[span_end + i + 1..].trim()),
        ),
        None => (directive, None),
    };
    let (target, span) = match selector.find('[') {
        Some(i) if selector.ends_with(']') => (selector[..i].trim(), &selector[i..]),
        Some(_) => return Err(format!("{directive:?} has an unclosed '['")),
        None if selector.contains(']') => return Err(format!("{directive:?} has a stray ']'")),
        None => (selector, ""),
    };
    let level = match level {
        Some(l) => Some(log_level(l).ok_or_else(|| {
            format!(
                "{l:?} in {directive:?} is not a level{}",
                suggestion(l, LOG_LEVELS)
            )
        })?),
        // A lone word: a level, else a target (all its levels).
        None if span.is_empty() => {
            if let Some(l) = log_level(target) {
                return Ok(l);
            }
            None
        }
        None => None,
    };
    if !target.is_empty() {
        let crate_name = target.split("::").next().unwrap_or(target);
        let known = LOG_TARGETS.contains(&crate_name)
            && target
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if !known {
            let what = if level.is_none() && span.is_empty() {
                "neither a level nor a naaice target"
            } else {
                "not a naaice target"
            };
            let all: Vec<&str> = LOG_LEVELS.iter().chain(LOG_TARGETS).copied().collect();
            let near = if level.is_none() && span.is_empty() {
                suggestion(target, &all)
            } else {
                suggestion(crate_name, LOG_TARGETS)
            };
            return Err(format!("{target:?} is {what}{near}"));
        }
    } else if span.is_empty() {
        return Err(format!("{directive:?} names no target"));
    }
    Ok(match level {
        Some(level) => format!("{target}{span}={level}"),
        None => format!("{target}{span}"),
    })
}

/// A level of a log filter in lower case, if `text` is one (`tracing`'s names, any case, or
/// the numbers 0 (off) to 5 (trace)).
fn log_level(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    if LOG_LEVELS.contains(&lower.as_str()) {
        return Some(lower);
    }
    match text {
        "0" => Some("off".into()),
        "1" => Some("error".into()),
        "2" => Some("warn".into()),
        "3" => Some("info".into()),
        "4" => Some("debug".into()),
        "5" => Some("trace".into()),
        _ => None,
    }
}

/// `" (did you mean X?)"` for the candidate nearest to `word`, if one is near enough.
fn suggestion(word: &str, candidates: &[&str]) -> String {
    nearest(word, candidates)
        .map(|n| format!(" (did you mean {n}?)"))
        .unwrap_or_default()
}

/// The candidate nearest to `word` (edit distance with transpositions, ignoring case), if it
/// is at most a third of the word's length away (2 edits for short words, at most 3).
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    let limit = (word.chars().count() / 3).clamp(2, 3);
    candidates
        .iter()
        .map(|c| {
            (
                strsim::damerau_levenshtein(&word, &c.to_ascii_lowercase()),
                *c,
            )
        })
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// [`VARIABLES`] as a Markdown table: variable, default, meaning.
pub fn variables_markdown() -> String {
    let mut md = String::from("| variable | default | meaning |\n|---|---|---|\n");
    for v in VARIABLES {
        md += &format!(
            "| `{}` | {} | {} |\n",
            v.name,
            cell(v.default),
            cell(v.meaning)
        );
    }
    md
}

/// Text for a roff line: backslashes and leading dots escaped.
fn roff_text(text: &str) -> String {
    let t = text.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// The `naaice(7)` overview page: what the stack is, its programs, and every environment
/// variable of [`VARIABLES`] with its default (`docs/man/naaice.7`, installed by
/// `install.sh`).
pub fn overview_man_page() -> String {
    let mut page = format!(
        ".TH naaice 7 \"\" \"naaice-rs {}\" \"naaice-rs\"\n",
        env!("CARGO_PKG_VERSION")
    );
    page += ".SH NAME\nnaaice \\- offload RPCs to network-attached accelerators (NAAs) over RDMA\n";
    page += ".SH DESCRIPTION\n";
    for paragraph in [
        "naaice-rs connects HPC applications to network-attached accelerators (FPGAs on the \
         data-centre network): a client announces its memory regions to the NAA (MRSP), then \
         runs RPCs, writing its inputs with RDMA and reading the NAA's outputs back. Programs \
         use the Rust crate naaice, or the C library libnaaice_ap2 with the headers naaice.h \
         (low level), naaice_ap2.h (middleware) and naaice_ap2_cpp.h (C++).",
        "The transport is verbs (RDMA: RoCEv2, InfiniBand, Soft-RoCE) or the software \
         transport (the same semantics over TCP, for machines without RDMA). The default, \
         auto, uses verbs where an RDMA device reaches the NAA and the software transport \
         otherwise; a software NAA on auto serves both.",
    ] {
        page += &format!(".PP\n{}\n", roff_text(paragraph));
    }
    page += ".SH PROGRAMS\n";
    for (name, what) in [
        ("naaice\\-swnaa(1)", "the software NAA server"),
        (
            "naaice\\-info(1)",
            "this machine's RDMA set-up, the effective configuration, and a probe of every NAA",
        ),
        (
            "naaice\\-bench(1)",
            "latency and bandwidth of an NAA, in the reference's CSV formats",
        ),
        (
            "naaice\\-spec",
            "NAA_SPEC for a Slurm job from the site's NAA inventory (its options: docs/configuration.md)",
        ),
    ] {
        page += &format!(".TP\n.B {name}\n{}\n", roff_text(what));
    }
    page += ".SH ENVIRONMENT\n";
    for v in VARIABLES {
        page += &format!(
            ".TP\n.B {}\n{} Default: {}.\n",
            roff_text(v.name),
            roff_text(&capitalised(v.meaning)),
            roff_text(v.default)
        );
    }
    page += ".SH \"SEE ALSO\"\n";
    page += "naaice\\-swnaa(1), naaice\\-info(1), naaice\\-bench(1), pkg\\-config(1); \
             docs/configuration.md in the source distribution\n";
    page
}

/// A meaning as a sentence: capitalised, with a full stop.
fn capitalised(text: &str) -> String {
    let mut s = text.to_owned();
    if let Some(first) = s.get(..1) {
        s.replace_range(..1, &first.to_uppercase());
    }
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

/// The sections of a man page that clap does not know.
#[cfg(feature = "cli")]
#[derive(Debug, Clone, Copy, Default)]
pub struct ManExtras<'a> {
    /// Library variables the binary also reads (names from [`VARIABLES`]), besides the
    /// variables behind its options.
    pub variables: &'a [&'a str],
    /// Whether it reads every variable of [`VARIABLES`] (then `variables` is not needed).
    pub every_variable: bool,
    /// Exit statuses and what they mean.
    pub exit_status: &'a [(&'a str, &'a str)],
    /// Example command lines and what each does.
    pub examples: &'a [(&'a str, &'a str)],
    /// Related pages, e.g. `naaice(7)`.
    pub see_also: &'a [&'a str],
}

/// The man page of `cmd` (section 1): clap's sections, then ENVIRONMENT (the options' variables
/// and `extras.variables`), EXIT STATUS, EXAMPLES and SEE ALSO.
#[cfg(feature = "cli")]
pub fn man_page(cmd: Command, extras: &ManExtras<'_>) -> std::io::Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    let mut roff = Roff::new();
    roff.control("SH", ["ENVIRONMENT"]);
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        if let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) {
            roff.control("TP", []).text([bold(var.to_string_lossy())]);
            roff.text([
                roman("The default of "),
                bold(format!("--{long}")),
                roman("."),
            ]);
        }
    }
    let listed = VARIABLES
        .iter()
        .filter(|v| extras.every_variable || extras.variables.contains(&v.name));
    for name in extras.variables {
        assert!(
            VARIABLES.iter().any(|v| v.name == *name),
            "{name} is not in naaice::environment::VARIABLES"
        );
    }
    for v in listed {
        roff.control("TP", []).text([bold(v.name)]);
        roff.text([roman(format!(
            "{} Default: {}.",
            capitalised(v.meaning),
            v.default
        ))]);
    }
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in extras.exit_status {
        roff.control("TP", []).text([bold(*code)]);
        roff.text([roman(*meaning)]);
    }
    roff.control("SH", ["EXAMPLES"]);
    for (command, what) in extras.examples {
        roff.control("TP", []).text([italic(*what)]);
        roff.control("nf", [])
            .text([roman(*command)])
            .control("fi", []);
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([roman(extras.see_also.join(", "))]);
    roff.to_writer(&mut out)?;
    if cmd.get_version().is_some() || cmd.get_long_version().is_some() {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

/// Answers a binary's hidden `--man-page` (`man_page`) or `--options-reference` (`options`)
/// flag: prints the man page or the options table of `cmd` on standard output and returns
/// the exit code; `None` when neither flag was given.
#[cfg(feature = "cli")]
pub fn print_reference(
    cmd: Command,
    man_page_asked: bool,
    options_asked: bool,
    extras: &ManExtras<'_>,
) -> Option<std::process::ExitCode> {
    if !man_page_asked && !options_asked {
        return None;
    }
    let name = cmd.get_name().to_owned();
    let out = if man_page_asked {
        man_page(cmd, extras)
    } else {
        Ok(options_markdown(&cmd).into_bytes())
    };
    Some(
        match out.and_then(|bytes| std::io::stdout().write_all(&bytes)) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::ExitCode::FAILURE
            }
        },
    )
}

/// One Markdown table cell: `|` escaped, lines joined.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The options of `cmd` as a Markdown table: option, variable, default, value, meaning.
#[cfg(feature = "cli")]
pub fn options_markdown(cmd: &Command) -> String {
    let mut md =
        String::from("| option | variable | default | value | meaning |\n|---|---|---|---|---|\n");
    let mut cmd = cmd.clone();
    cmd.build();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = arg.get_long() else { continue };
        let short = arg
            .get_short()
            .map(|s| format!(", `-{s}`"))
            .unwrap_or_default();
        let var = arg
            .get_env()
            .map(|v| format!("`{}`", v.to_string_lossy()))
            .unwrap_or_default();
        let default = arg
            .get_default_values()
            .iter()
            .map(|v| format!("`{}`", v.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(", ");
        let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
        let value = match arg.get_value_names() {
            Some(names) if takes_value => names.join(" "),
            _ if takes_value => long.to_uppercase(),
            _ => String::new(),
        };
        let help = arg
            .get_long_help()
            .or_else(|| arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        md += &format!(
            "| `--{long}`{short} | {var} | {default} | {} | {} |\n",
            cell(&value),
            cell(&help)
        );
    }
    md
}

/// Replaces the text between `<!-- BEGIN name -->` and `<!-- END name -->` in `doc` with
/// `body`; `None` when the markers are missing.
pub fn splice(doc: &str, name: &str, body: &str) -> Option<String> {
    let begin = format!("<!-- BEGIN {name} -->\n");
    let end = format!("<!-- END {name} -->");
    let start = doc.find(&begin)? + begin.len();
    let stop = start + doc[start..].find(&end)?;
    Some(format!("{}{body}{}", &doc[..start], &doc[stop..]))
}

/// Checks that the section `name` of the Markdown file `path` is `body`; with
/// `NAAICE_BLESS=1` in the environment, writes it instead. The error says how to update.
pub fn check_section(path: &std::path::Path, name: &str, body: &str) -> Result<(), String> {
    let doc = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let want = splice(&doc, name, body)
        .ok_or_else(|| format!("{}: no <!-- BEGIN/END {name} --> markers", path.display()))?;
    if want == doc {
        return Ok(());
    }
    if std::env::var("NAAICE_BLESS").is_ok_and(|v| v == "1") {
        let mut f = std::fs::File::create(path).map_err(|e| e.to_string())?;
        return f.write_all(want.as_bytes()).map_err(|e| e.to_string());
    }
    Err(format!(
        "{}: the section {name} differs from what the code generates; regenerate it with \
         NAAICE_BLESS=1 and the same test",
        path.display()
    ))
}

/// For a binary's tests: its `--options-reference` table is the section named after the
/// binary in `docs/configuration.md` (`repo` is the repository's root), and its `--man-page`
/// has the sections ENVIRONMENT, EXIT STATUS, EXAMPLES and SEE ALSO. Returns the table.
pub fn check_binary_reference(
    exe: &std::path::Path,
    repo: &std::path::Path,
) -> Result<String, String> {
    let name = exe
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("the binary has no name")?;
    let output = |flag: &str| -> Result<String, String> {
        let out = std::process::Command::new(exe)
            .arg(flag)
            .output()
            .map_err(|e| format!("{name} {flag}: {e}"))?;
        if !out.status.success() {
            return Err(format!("{name} {flag}: {}", out.status));
        }
        String::from_utf8(out.stdout).map_err(|e| format!("{name} {flag}: {e}"))
    };
    let table = output("--options-reference")?;
    check_section(&repo.join("docs/configuration.md"), name, &table)?;
    let page = output("--man-page")?;
    for section in [
        ".SH ENVIRONMENT",
        ".SH \"EXIT STATUS\"",
        ".SH EXAMPLES",
        ".SH \"SEE ALSO\"",
    ] {
        if !page.contains(section) {
            return Err(format!("the man page of {name} has no {section}"));
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_filters_of_levels_and_naaice_targets() {
        for (text, normalised) in [
            ("warn", "warn"),
            (" DEBUG ", "debug"),
            ("4", "debug"),
            ("naaice=debug,warn", "naaice=debug,warn"),
            (" naaice = Trace , , info", "naaice=trace,info"),
            (
                "naaice::transport::soft=trace",
                "naaice::transport::soft=trace",
            ),
            ("naaice_swnaa", "naaice_swnaa"),
            ("naaice[rpc{id=3}]=debug", "naaice[rpc{id=3}]=debug"),
            ("[rpc]=debug", "[rpc]=debug"),
            ("off", "off"),
        ] {
            assert_eq!(log_filter(text).as_deref(), Ok(normalised), "{text}");
        }
    }

    /// Words `tracing` would take as targets that select nothing are errors naming the
    /// accepted forms, with the nearest level or target.
    #[test]
    fn log_filter_typos_are_errors() {
        for (text, needles) in [
            (
                "degub",
                &[
                    "\"degub\" is neither a level nor a naaice target",
                    "did you mean debug?",
                ][..],
            ),
            (
                "verbose",
                &["\"verbose\" is neither a level nor a naaice target"],
            ),
            (
                "naaice=verbose",
                &["\"verbose\" in \"naaice=verbose\" is not a level"],
            ),
            ("naaice=", &["\"\" in \"naaice=\" is not a level"]),
            (
                "naiace=debug",
                &["\"naiace\" is not a naaice target", "did you mean naaice?"],
            ),
            ("tokio=debug,warn", &["\"tokio\" is not a naaice target"]),
            (
                "naaice-swnaa=info",
                &["\"naaice-swnaa\" is not a naaice target"],
            ),
            ("", &["it is empty"]),
            (" , ", &["it is empty"]),
            ("naaice[rpc=debug", &["unclosed '['"]),
            ("=debug", &["names no target"]),
        ] {
            let err = log_filter(text).unwrap_err();
            let message = err.to_string();
            for needle in needles {
                assert!(message.contains(needle), "{text}: {message}");
            }
            assert!(message.contains(LOG_FILTER_FORMS), "{message}");
            assert_eq!(err.text, text);
        }
        assert_eq!(nearest("warning", LOG_LEVELS), None);
        assert_eq!(nearest("WARN", LOG_LEVELS), Some("warn"));
        assert_eq!(nearest("inf", LOG_LEVELS), Some("info"));
    }

    #[test]
    fn splice_replaces_only_the_section() {
        let doc = "a\n<!-- BEGIN x -->\nold\n<!-- END x -->\nb\n";
        assert_eq!(
            splice(doc, "x", "new\n").unwrap(),
            "a\n<!-- BEGIN x -->\nnew\n<!-- END x -->\nb\n"
        );
        assert!(splice(doc, "y", "").is_none());
    }

    /// The library's variables in `docs/configuration.md` are the code's.
    #[test]
    fn the_configuration_reference_lists_every_variable() {
        let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
        check_section(&doc, "variables", &variables_markdown()).unwrap();
    }

    /// `docs/man/naaice.7` is the generated page (`NAAICE_BLESS=1` rewrites it).
    #[test]
    fn the_overview_man_page_is_the_code() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/man/naaice.7");
        let page = overview_man_page();
        assert!(page.contains(".SH ENVIRONMENT") && page.contains("NAAICE_TRANSPORT"));
        if std::env::var("NAAICE_BLESS").is_ok_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &page).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == page,
            "{} differs from the code; regenerate with NAAICE_BLESS=1",
            path.display()
        );
    }

    #[test]
    #[cfg(feature = "cli")]
    fn tables_and_pages_from_a_command() {
        let cmd = Command::new("demo").version("1.0").about("Demo.").arg(
            clap::Arg::new("port")
                .long("port")
                .short('p')
                .env("DEMO_PORT")
                .value_name("PORT")
                .default_value("12345")
                .help("Port | to listen on."),
        );
        let md = options_markdown(&cmd);
        assert!(
            md.contains(
                "| `--port`, `-p` | `DEMO_PORT` | `12345` | PORT | Port \\| to listen on. |"
            ),
            "{md}"
        );
        let extras = ManExtras {
            variables: &["NAAICE_LOG"],
            every_variable: false,
            exit_status: &[("0", "Success.")],
            examples: &[("demo --port 1", "Listen on port 1.")],
            see_also: &["naaice(7)"],
        };
        let page = String::from_utf8(man_page(cmd, &extras).unwrap()).unwrap();
        for needle in [
            ".SH ENVIRONMENT",
            "DEMO_PORT",
            "NAAICE_LOG",
            ".SH \"EXIT STATUS\"",
            ".SH EXAMPLES",
            "demo \\-\\-port 1",
            "naaice(7)",
        ] {
            assert!(page.contains(needle), "{needle} missing:\n{page}");
        }
    }
}
