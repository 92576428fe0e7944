//! The committed headers `include/naaice.h` (AP1, shared types, last error) and
//! `include/naaice_ap2.h` (AP2, software NAA; includes `naaice.h`) are what cbindgen generates
//! from this crate: this test fails when they differ. So do the man pages of section 3
//! (`docs/man/man3/FUNCTION.3`, one per function of either header), which are generated from
//! the headers' prototypes and comments. `NAAICE_BLESS=1` rewrites the committed files
//! instead.

use std::collections::BTreeMap;
use std::path::Path;

/// The headers: file, cbindgen configuration, sources.
const NAAICE_H: (&str, &str, &[&str]) = (
    "naaice.h",
    "cbindgen-naaice.toml",
    &[
        "src/version.rs",
        "src/ap1/types.rs",
        "src/ap1.rs",
        "src/error.rs",
    ],
);
const NAAICE_AP2_H: (&str, &str, &[&str]) = (
    "naaice_ap2.h",
    "cbindgen.toml",
    &[
        "src/types.rs",
        "src/ap2.rs",
        "src/swnaa.rs",
        // naaice-rs extensions (not in the reference), at the end of the header.
        "src/ap2/call.rs",
        "src/local.rs",
        "src/ap2/set.rs",
        "src/ap2/stats.rs",
        "src/pipeline.rs",
    ],
);

fn bless() -> bool {
    std::env::var_os("NAAICE_BLESS").is_some()
}

/// A header as cbindgen generates it from its sources with its configuration.
fn generate((_, config, sources): (&str, &str, &[&str])) -> String {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join(config)).expect("the cbindgen config is valid");
    let mut builder = cbindgen::Builder::new().with_config(config);
    for s in sources {
        builder = builder.with_src(crate_dir.join(s));
    }
    let bindings = builder.generate().expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    String::from_utf8(generated).expect("the header is UTF-8")
}

/// Checks (or with `NAAICE_BLESS`, writes) the committed `include/{header}`.
fn check(spec: (&str, &str, &[&str])) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = spec.0;
    let generated = generate(spec);
    let path = crate_dir.join("include").join(header);
    if bless() {
        std::fs::write(&path, &generated).expect("write the header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/{header} is out of date with the code; regenerate it with \
         `NAAICE_BLESS=1 cargo test -p naaice-capi --test header` and commit it"
    );
}

#[test]
fn committed_naaice_h_matches_the_code() {
    check(NAAICE_H);
}

#[test]
fn committed_naaice_ap2_h_matches_the_code() {
    check(NAAICE_AP2_H);
}

/// A function of a header: its name, its prototype as the header writes it, and the lines of
/// the comment before it.
struct Function {
    name: String,
    prototype: String,
    doc: Vec<String>,
}

/// The functions a header declares (top-level prototypes; not function-pointer types), each
/// with its comment.
fn functions(header: &str) -> Vec<Function> {
    let mut out = Vec::new();
    let mut comment: Option<Vec<String>> = None;
    let mut open: Option<Vec<String>> = None;
    let mut lines = header.lines();
    while let Some(line) = lines.next() {
        if let Some(c) = open.as_mut() {
            if line.trim() == "*/" {
                comment = open.take();
            } else {
                c.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
            }
            continue;
        }
        if line == "/*" {
            open = Some(Vec::new());
            continue;
        }
        let prototype_start = line.starts_with(|c: char| c.is_ascii_lowercase())
            && !line.starts_with("typedef")
            && line.contains('(');
        if prototype_start {
            let mut prototype = line.to_owned();
            while !prototype.trim_end().ends_with(");") {
                let next = lines.next().expect("a prototype ends with );");
                prototype.push('\n');
                prototype.push_str(next);
            }
            let before = &prototype[..prototype.find('(').expect("(")];
            let name = before
                .rsplit(|c: char| c.is_whitespace() || c == '*')
                .next()
                .expect("a name")
                .to_owned();
            out.push(Function {
                name,
                prototype,
                doc: comment.take().unwrap_or_default(),
            });
        } else if !line.trim().is_empty() {
            comment = None;
        }
    }
    out
}

/// `text` escaped for roff, with Markdown's `code` and **bold** in bold.
fn roff(text: &str) -> String {
    let mut out = text.replace('\\', "\\e").replace('-', "\\-");
    for mark in ["**", "`"] {
        let mut parts = out.split(mark);
        let mut joined = parts.next().unwrap_or_default().to_owned();
        for (i, part) in parts.enumerate() {
            joined.push_str(if i % 2 == 0 { "\\fB" } else { "\\fR" });
            joined.push_str(part);
        }
        out = joined;
    }
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// The man page of `f`, declared in `header`; `others` are the names of every function, for
/// SEE ALSO.
fn page(f: &Function, header: &str, others: &[String]) -> String {
    // Paragraphs of the comment, without the headers' section banners (`==== … ====`).
    let mut paragraphs: Vec<Vec<&str>> = vec![Vec::new()];
    for line in &f.doc {
        if line.is_empty() {
            paragraphs.push(Vec::new());
        } else {
            paragraphs.last_mut().expect("one").push(line);
        }
    }
    paragraphs.retain(|p| !p.is_empty() && !p[0].starts_with("===="));
    let summary = paragraphs.first().map(|p| p.join(" ")).unwrap_or_default();
    let summary = summary
        .split_once(". ")
        .map_or(summary.as_str(), |(first, _)| first)
        .trim_end_matches('.')
        .to_owned();
    let mut text = format!(
        ".TH {name} 3 \"\" \"naaice-rs\" \"naaice-rs C API\"\n\
         .SH NAME\n{name} \\- {summary}\n\
         .SH SYNOPSIS\n.nf\n.B #include <{header}>\n.PP\n{prototype}\n.fi\n.PP\n\
         Link with \\fB\\-lnaaice_ap2\\fR (\\fBpkg\\-config \\-\\-cflags \\-\\-libs naaice\\fR).\n\
         .SH DESCRIPTION\n",
        name = roff(&f.name),
        summary = roff(&summary),
        prototype = f.prototype.lines().map(roff).collect::<Vec<_>>().join("\n"),
    );
    for p in &paragraphs {
        let (heading, lines) = match p[0].strip_prefix("# ") {
            Some(h) => (Some(h), &p[1..]),
            None => (None, &p[..]),
        };
        if let Some(h) = heading {
            text += &format!(".SS {}\n", roff(h));
        }
        let mut item = false;
        for (i, line) in lines.iter().enumerate() {
            if let Some(rest) = line.strip_prefix("* ").or_else(|| line.strip_prefix("- ")) {
                text += ".IP \\(bu 2\n";
                text += &roff(rest);
                item = true;
            } else {
                if i == 0 {
                    text += ".PP\n";
                } else if item {
                    text.push(' ');
                }
                text += &roff(line.trim_start());
            }
            text.push('\n');
        }
    }
    let doc = f.doc.join(" ");
    let mut see: Vec<String> = others
        .iter()
        .filter(|o| **o != f.name && mentions(&doc, o))
        .map(|o| format!("{}(3)", roff(o)))
        .collect();
    see.push("naaice(7)".to_owned());
    text += &format!(".SH SEE ALSO\n{}\n", see.join(", "));
    text
}

/// `text` names `word` (as a whole word).
fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        !text[..i].ends_with(ident) && !text[i + word.len()..].starts_with(ident)
    })
}

/// Every function of the headers has its page in `docs/man/man3` (installed by
/// `install.sh`), its SYNOPSIS the header's prototype and its DESCRIPTION the header's
/// comment; there are no other pages. `NAAICE_BLESS=1` rewrites the pages.
#[test]
fn man3_pages_are_the_headers() {
    let mut pages = BTreeMap::new();
    let headers = [
        (NAAICE_H.0, functions(&generate(NAAICE_H))),
        (NAAICE_AP2_H.0, functions(&generate(NAAICE_AP2_H))),
    ];
    let names: Vec<String> = headers
        .iter()
        .flat_map(|(_, fs)| fs.iter().map(|f| f.name.clone()))
        .collect();
    for must in [
        "naa_create",
        "naa_finalize",
        "naa_testall",
        "naaice_init_communication_context",
        "naa_clear_last_error",
    ] {
        assert!(
            names.iter().any(|n| n == must),
            "{must} not found: {names:?}"
        );
    }
    for (header, fs) in &headers {
        for f in fs {
            assert!(!f.doc.is_empty(), "{} has no comment in {header}", f.name);
            pages.insert(format!("{}.3", f.name), page(f, header, &names));
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/man/man3");
    let committed = |dir: &Path| -> BTreeMap<String, String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .map(|e| e.expect("a directory entry").path())
                    .filter(|p| p.extension().is_some_and(|e| e == "3"))
                    .map(|p| {
                        let name = p
                            .file_name()
                            .expect("a name")
                            .to_string_lossy()
                            .into_owned();
                        (name, std::fs::read_to_string(&p).expect("a page"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    if bless() {
        std::fs::create_dir_all(&dir).expect("docs/man/man3");
        for name in committed(&dir).keys() {
            std::fs::remove_file(dir.join(name)).expect("remove a page");
        }
        for (name, text) in &pages {
            std::fs::write(dir.join(name), text).expect("write a page");
        }
        return;
    }
    let have = committed(&dir);
    let missing: Vec<&String> = pages.keys().filter(|n| !have.contains_key(*n)).collect();
    let stale: Vec<&String> = have.keys().filter(|n| !pages.contains_key(*n)).collect();
    let differ: Vec<&String> = pages
        .iter()
        .filter(|(n, text)| have.get(*n).is_some_and(|h| h != *text))
        .map(|(n, _)| n)
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty() && differ.is_empty(),
        "docs/man/man3 is out of date with the headers (missing {missing:?}, not a function \
         {stale:?}, different {differ:?}); regenerate it with \
         `NAAICE_BLESS=1 cargo test -p naaice-capi --test header` and commit it"
    );
}
