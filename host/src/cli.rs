//! What the binaries' command lines share (cargo feature `cli`): man pages with the sections
//! people look for (ENVIRONMENT, EXIT STATUS, EXAMPLES, SEE ALSO) and the Markdown reference
//! of their options that `docs/configuration.md` holds. Both are generated from the clap
//! command itself, so they cannot drift from what the binary accepts.

use std::io::Write;

use clap::Command;
use roff::{Roff, bold, italic, roman};

use crate::environment::VARIABLES;

/// The sections of a man page that clap does not know.
#[derive(Debug, Clone, Copy, Default)]
pub struct ManExtras<'a> {
    /// Library variables the binary also reads (names from [`VARIABLES`]), besides the
    /// variables behind its options.
    pub variables: &'a [&'a str],
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
    for name in extras.variables {
        let v = VARIABLES
            .iter()
            .find(|v| v.name == *name)
            .unwrap_or_else(|| panic!("{name} is not in naaice::environment::VARIABLES"));
        roff.control("TP", []).text([bold(v.name)]);
        roff.text([roman(format!(
            "{} Default: {}.",
            sentence(v.meaning),
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

/// A meaning as a sentence: capitalised, with a full stop.
fn sentence(text: &str) -> String {
    let mut s = text.to_owned();
    if let Some(first) = s.get(..1) {
        s.replace_range(..1, &first.to_uppercase());
    }
    if !s.ends_with('.') {
        s.push('.');
    }
    s
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
