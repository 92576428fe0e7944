//! Our headers against the public names of the C reference's headers
//! (`tests/reference_names.txt`): every name must be declared by our header of the same name
//! (or one it includes), or be listed with a reason in a "Reference names left out" block of
//! their opening comments; a name that disappears, or a left-out name that is declared after
//! all, fails the test. The declared C names are then compiled and linked from a generated C
//! program per header, and a reference-style low-level client (`tests/c/reference_client.c`,
//! which uses every reference macro `naaice.h` provides) runs against the software NAA.

#[path = "../common/mod.rs"]
mod common;
mod declarations;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::*;
use declarations::{Declarations, scan};
use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig};
use naaice::transport::soft::SoftTransport;

const LIMIT: Duration = Duration::from_secs(300);

/// One line of `reference_names.txt`.
#[derive(Debug)]
struct Name {
    header: String,
    kind: String,
    name: String,
}

fn reference_names() -> Vec<Name> {
    let path = crate_dir().join("tests/reference_names.txt");
    let text = std::fs::read_to_string(&path).expect("read reference_names.txt");
    let names: Vec<Name> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(fields.len(), 3, "malformed line {l:?}");
            Name {
                header: fields[0].to_owned(),
                kind: fields[1].to_owned(),
                name: fields[2].to_owned(),
            }
        })
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for n in &names {
        assert!(
            seen.insert((&n.header, &n.kind, &n.name)),
            "{} {} {} listed twice",
            n.header,
            n.kind,
            n.name
        );
    }
    names
}

/// Our headers a program including the reference's `header` sees (ours include each other
/// as the reference's do). There is no `naaice_swnaa.h`: its names are looked up in the
/// headers that hold our software NAA API.
fn our_headers(header: &str) -> &'static [&'static str] {
    match header {
        "naaice.h" => &["naaice.h"],
        "naaice_ap2.h" | "naaice_swnaa.h" => &["naaice_ap2.h", "naaice.h"],
        "naaice_ap2_cpp.h" => &["naaice_ap2_cpp.h", "naaice_ap2.h", "naaice.h"],
        other => panic!("unknown reference header {other}"),
    }
}

fn scanned() -> BTreeMap<&'static str, Declarations> {
    ["naaice.h", "naaice_ap2.h", "naaice_ap2_cpp.h"]
        .into_iter()
        .map(|h| {
            let path = crate_dir().join("include").join(h);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (h, scan(&text))
        })
        .collect()
}

#[test]
fn every_reference_name_is_declared_or_left_out_with_a_reason() {
    let names = reference_names();
    let ours = scanned();
    let mut problems = Vec::new();
    let (mut declared, mut left_out) = (0, 0);
    // Per reference header: (declared, left out).
    let mut per_header: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for n in &names {
        let counts = per_header.entry(&n.header).or_default();
        let headers = our_headers(&n.header);
        let found = headers.iter().find(|h| ours[*h].declares(&n.kind, &n.name));
        let reason = headers.iter().find_map(|h| ours[*h].omitted.get(&n.name));
        match (found, reason) {
            (Some(_), None) => {
                declared += 1;
                counts.0 += 1;
            }
            (None, Some(reason)) if !reason.is_empty() => {
                left_out += 1;
                counts.1 += 1;
            }
            (None, Some(_)) => problems.push(format!("{}: left out without a reason", n.name)),
            (Some(h), Some(_)) => problems.push(format!(
                "{} ({} of {}) is declared by {h} but listed as left out",
                n.name, n.kind, n.header
            )),
            (None, None) => problems.push(format!(
                "{} ({} of the reference's {}) is neither declared by {} nor listed as left \
                 out with a reason",
                n.name,
                n.kind,
                n.header,
                headers.join(" / ")
            )),
        }
    }
    // Every left-out name is a reference name (no stale entries).
    for (h, d) in &ours {
        for name in d.omitted.keys() {
            if !names.iter().any(|n| &n.name == name) {
                problems.push(format!(
                    "{h} lists {name} as left out, but the reference has no such name"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!(
        "{} reference names: {declared} declared, {left_out} left out with a reason",
        names.len()
    );
    for (header, (d, l)) in &per_header {
        println!("  {header}: {d} declared, {l} left out");
    }
    assert_eq!(declared + left_out, names.len());
    // The name the reference's low-level programs need first.
    assert!(ours["naaice.h"].declares("macro", "SERVER_CONNECTION_PORT"));
}

/// A C statement (or preprocessor check) that fails to compile, or to link, if `name` of
/// `kind` is missing; `None` for kinds C cannot use.
fn use_in_c(kind: &str, name: &str, decls: &[&Declarations]) -> Option<String> {
    Some(match kind {
        "guard" | "macro" => format!("#ifndef {name}\n#error \"{name} is not defined\"\n#endif\n"),
        "constant" => format!("    (void)({name});\n"),
        "enum" => format!("    (void)sizeof(enum {name});\n"),
        "typedef" => format!("    (void)sizeof({name} *);\n"),
        "struct" if decls.iter().any(|d| d.structs.get(name) == Some(&true)) => {
            format!("    (void)sizeof(struct {name});\n")
        }
        "struct" => format!("    {{ struct {name} *opaque = NULL; (void)opaque; }}\n"),
        "function" => format!("    (fnptr)&{name},\n"),
        _ => return None,
    })
}

#[test]
fn declared_reference_names_compile_and_link() {
    let names = reference_names();
    let ours = scanned();
    let out = out_dir("reference_names");
    for header in ["naaice.h", "naaice_ap2.h"] {
        let decls: Vec<&Declarations> = our_headers(header).iter().map(|h| &ours[h]).collect();
        let (mut checks, mut statements, mut functions) = (String::new(), String::new(), 0);
        for n in names.iter().filter(|n| n.header == header) {
            if !decls.iter().any(|d| d.declares(&n.kind, &n.name)) {
                continue;
            }
            let Some(code) = use_in_c(&n.kind, &n.name, &decls) else {
                continue;
            };
            match n.kind.as_str() {
                "guard" | "macro" => checks.push_str(&code),
                // Functions go into the table below.
                "function" => functions += 1,
                _ => statements.push_str(&code),
            }
        }
        let table: String = names
            .iter()
            .filter(|n| n.header == header && n.kind == "function")
            .filter(|n| decls.iter().any(|d| d.declares("function", &n.name)))
            .filter_map(|n| use_in_c("function", &n.name, &decls))
            .collect();
        let program = format!(
            "/* Generated by tests/reference_names: the reference names {header} declares. */\n\
             #include <{header}>\n{checks}\n\
             typedef void (*fnptr)(void);\n\
             /* Taking their addresses makes the linker resolve every function. */\n\
             static const fnptr functions[] = {{\n{table}}};\n\n\
             int main(void) {{\n{statements}\
             \x20   volatile fnptr first = functions[0];\n\
             \x20   printf(\"%zu functions%s\\n\", sizeof functions / sizeof functions[0],\n\
             \x20          first != NULL ? \"\" : \" (none)\");\n\
             \x20   return 0;\n}}\n"
        );
        let stem = header.trim_end_matches(".h");
        let source = out.join(format!("{stem}_names.c"));
        std::fs::write(&source, program).expect("write the generated program");
        let bin = out.join(format!("{stem}_names"));
        link_with_library(cc(), &["-std=c11"], &[&source], &bin);
        let f = run_ok(&mut Command::new(&bin), LIMIT);
        assert_eq!(
            f.stdout.trim(),
            format!("{functions} functions"),
            "{header}"
        );
    }
}

#[test]
fn reference_style_low_level_client_builds_and_runs() {
    let bin = out_dir("reference_names").join("reference_client");
    let flags = [
        &["-std=c11", "-Werror=implicit-function-declaration"],
        SANITIZERS,
    ]
    .concat();
    link_with_library(cc(), &flags, &["tests/c/reference_client.c"], &bin);
    // The built-in kernels (function code 1 adds 1 to every byte of every parameter region).
    let addr = "127.0.0.1:0".parse().expect("loopback address");
    let naa = SoftNaa::bind(
        SoftTransport::default(),
        addr,
        SoftNaaConfig::default(),
        KernelRegistry::builtin(),
    )
    .and_then(SoftNaa::spawn)
    .expect("start the software NAA");
    let port = naa.local_addr().port().to_string();
    let f = run_ok(
        sanitizer_env(&mut Command::new(&bin)).args(["127.0.0.1", &port]),
        LIMIT,
    );
    naa.shutdown();
    assert!(
        f.stdout.contains(&format!(
            "reference client on port {port}: correct, 0 failed"
        )),
        "{}\n{}",
        f.stdout,
        f.stderr
    );
}
