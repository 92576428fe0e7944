//! The man page (`--man-page`, hidden; `install.sh` installs its output): clap_mangen's
//! sections, then ENVIRONMENT (from the library's table of variables), EXIT STATUS and
//! EXAMPLES, then VERSION.

use std::io::Write;
use std::process::ExitCode;

use naaice::environment::VARIABLES;

/// Commands and what they do, for EXAMPLES.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "naaice-info",
        "Show the build, the RDMA devices, the configuration, the rank and the NAAs of this \
         shell's environment.",
    ),
    (
        "NAA_SPEC=10.0.0.5:12345:1:1,10.0.0.6:12345:1:1 naaice-info --probe",
        "Probe both NAAs: connect, memory-region setup and one RPC of function 1 each.",
    ),
    (
        "naaice-info --spec 127.0.0.1:12345:3:0 --probe --timeout 500ms",
        "Probe a software NAA on this machine (naaice-swnaa; function 3 does nothing), \
         whatever NAA_SPEC says, waiting at most half a second.",
    ),
    (
        "srun -n 4 sh -c 'naaice-info --json > info.$SLURM_PROCID.json'",
        "Record, for each rank of a Slurm job, the entry it prefers (spec.preferences in the \
         JSON document).",
    ),
    (
        "naaice-info --probe > probe.txt || exit 1",
        "In a job script: stop before the application starts if the configuration is \
         invalid or an NAA does not answer (probe.txt says why).",
    ),
];

/// Escapes text for roff: backslashes, hyphens (so that options copy as typed) and a
/// leading dot or quote.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with(['.', '\'']) {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// The ENVIRONMENT, EXIT STATUS and EXAMPLES sections.
fn extra_sections(exit_status: &str) -> String {
    let mut out = String::from(".SH ENVIRONMENT\n");
    out += &roff(
        "Every variable the NAAICE library and its C API read (naaice-info reads them the \
         same way and shows each with its value and source):",
    );
    out += "\n";
    for v in VARIABLES {
        let default = match v.default.strip_prefix("(none") {
            Some(rest) => format!("unset by default{}", rest.trim_end_matches(')')),
            None => format!("default: {}", v.default),
        };
        out += &format!(
            ".TP\n\\fB{}\\fR\n{} ({}).\n",
            roff(v.name),
            roff(v.meaning),
            roff(&default)
        );
    }
    out += ".PP\n";
    out += &roff(
        "naaice-info itself logs to standard error filtered by NAAICE_LOG, like the C library.",
    );
    out += "\n.SH \"EXIT STATUS\"\n";
    for status in exit_status.split(". ") {
        let status = status.trim_end_matches('.');
        if let Some((code, meaning)) = status.split_once(": ") {
            out += &format!(".TP\n\\fB{code}\\fR\n{}.\n", roff(meaning));
        }
    }
    out += ".SH EXAMPLES\n";
    for (command, what) in EXAMPLES {
        out += &format!(".TP\n\\fB{}\\fR\n{}\n", roff(command), roff(what));
    }
    out
}

/// Prints the man page of `cmd` with the extra sections.
pub(crate) fn print(cmd: clap::Command, exit_status: &str) -> ExitCode {
    let man = clap_mangen::Man::new(cmd);
    let mut page = Vec::new();
    let rendered = (|| {
        man.render_title(&mut page)?;
        man.render_name_section(&mut page)?;
        man.render_synopsis_section(&mut page)?;
        man.render_description_section(&mut page)?;
        man.render_options_section(&mut page)?;
        page.extend_from_slice(extra_sections(exit_status).as_bytes());
        man.render_version_section(&mut page)?;
        std::io::stdout().write_all(&page)
    })();
    match rendered {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("naaice-info: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_escapes() {
        assert_eq!(roff("--probe"), "\\-\\-probe");
        assert_eq!(roff(".x"), "\\&.x");
        assert_eq!(roff("a\\b"), "a\\eb");
    }

    #[test]
    fn exit_statuses_become_items() {
        let text = extra_sections("0: fine. 1: not fine. 2: bad usage.");
        assert!(text.contains(".TP\n\\fB1\\fR\nnot fine.\n"), "{text}");
        assert!(text.contains("\\fBNAAICE_TRANSPORT\\fR"), "{text}");
    }
}
