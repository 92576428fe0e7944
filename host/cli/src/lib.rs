//! What the command lines of naaice-rs's binaries (`naaice-swnaa`, `naaice-bench`,
//! `naaice-info`) share, generated from the code so that it cannot drift: man pages with the
//! sections people look for (ENVIRONMENT, EXIT STATUS, EXAMPLES, SEE ALSO) and the Markdown
//! table of a binary's options, both from its clap command; the Markdown table of the
//! library's environment variables ([`variables_markdown`]) and the overview page
//! `naaice(7)`. `docs/configuration.md` holds the tables between `<!-- BEGIN name -->` and
//! `<!-- END name -->` markers; tests compare them with [`check_section`] (`NAAICE_BLESS=1`
//! rewrites them). `--log` values are checked with the library's
//! [`log_filter`] ([`log_filter_arg`]); the other value parsers the binaries share are in
//! [`values`].
//!
//! Internal to naaice-rs (published only because its binaries are; no API stability
//! promise): the library itself needs no clap.

pub mod values;

use std::io::Write;

use clap::Command;
use naaice::discovery::environment::VARIABLES;
use naaice::discovery::log_filter::log_filter;
use roff::{Roff, bold, italic, roman};

/// [`log_filter`] as a command-line value parser (`--log`, `NAAICE_LOG`): the normalised
/// filter, which `tracing_subscriber::EnvFilter` takes as well, or the message of a
/// command-line error (clap exits with status 2).
pub fn log_filter_arg(text: &str) -> Result<String, String> {
    let filter = log_filter(text).map_err(|e| e.to_string())?;
    tracing_subscriber::EnvFilter::try_new(&filter)
        .map(|_| filter)
        .map_err(|e| format!("{text:?} is not a log filter: {e}"))
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
            "{name} is not in naaice::discovery::environment::VARIABLES"
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
        let doc =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
        check_section(&doc, "variables", &variables_markdown()).unwrap();
    }

    /// `docs/man/naaice.7` is the generated page (`NAAICE_BLESS=1` rewrites it).
    #[test]
    fn the_overview_man_page_is_the_code() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/man/naaice.7");
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
