//! What a C or C++ header declares, read with a small scanner (no compiler): macros,
//! enumerators, struct / enum tags, typedefs, functions, and for C++ concepts, alias
//! templates, classes and their member functions; plus the names its opening comment lists
//! as left out ("Reference names left out" block, one `- NAMES: reason` bullet each).

use std::collections::{BTreeMap, BTreeSet};

/// The declarations of one header.
#[derive(Debug, Default)]
pub(crate) struct Declarations {
    /// `#define NAME` (object- and function-like).
    pub(crate) macros: BTreeSet<String>,
    /// Enumerators.
    pub(crate) constants: BTreeSet<String>,
    /// Struct tags, with whether the header defines the struct (`false`: opaque).
    pub(crate) structs: BTreeMap<String, bool>,
    /// Enum tags.
    pub(crate) enums: BTreeSet<String>,
    /// Typedef names.
    pub(crate) typedefs: BTreeSet<String>,
    /// Functions declared at namespace scope.
    pub(crate) functions: BTreeSet<String>,
    /// C++ concepts.
    pub(crate) concepts: BTreeSet<String>,
    /// C++ alias templates and type aliases (`using NAME =`).
    pub(crate) aliases: BTreeSet<String>,
    /// C++ classes (`class NAME {`).
    pub(crate) classes: BTreeSet<String>,
    /// Public and private member functions as `Class::name` (`Class::~Class` for destructors).
    pub(crate) methods: BTreeSet<String>,
    /// Names the opening comment lists as left out, with the reason given.
    pub(crate) omitted: BTreeMap<String, String>,
}

impl Declarations {
    /// True if the header declares `name` as `kind` (a kind of `reference_names.txt`).
    pub(crate) fn declares(&self, kind: &str, name: &str) -> bool {
        match kind {
            "guard" | "macro" => self.macros.contains(name),
            // An enumerator may also be provided as a macro of the same value.
            "constant" => self.constants.contains(name) || self.macros.contains(name),
            "struct" => self.structs.contains_key(name),
            "enum" => self.enums.contains(name),
            "typedef" => self.typedefs.contains(name),
            "function" => self.functions.contains(name),
            "concept" => self.concepts.contains(name),
            "alias" => self.aliases.contains(name),
            "class" => self.classes.contains(name),
            "method" => self.methods.contains(name),
            other => panic!("unknown kind {other:?} in reference_names.txt"),
        }
    }
}

/// Scans `text`, the contents of a header.
pub(crate) fn scan(text: &str) -> Declarations {
    let mut d = Declarations {
        omitted: omitted_block(text),
        ..Declarations::default()
    };
    let code = strip_comments(text);
    let mut rest = String::new();
    for line in join_continuations(&code).lines() {
        let line = line.trim_start();
        if let Some(directive) = line.strip_prefix('#') {
            if let Some(def) = directive.trim_start().strip_prefix("define")
                && let Some(name) = leading_identifier(def.trim_start())
            {
                d.macros.insert(name);
            }
        } else {
            rest.push_str(line);
            rest.push('\n');
        }
    }
    walk(&tokens(&rest), &mut d);
    d
}

/// The "Reference names left out" block of the opening comment: after its introduction,
/// bullets ` *  - A, B: reason` (continued on lines indented further), up to the first other
/// or empty comment line.
fn omitted_block(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(start) = text.find("Reference names left out") else {
        return out;
    };
    let mut bullets: Vec<String> = Vec::new();
    for line in text[start..].lines().skip(1) {
        let body = line.trim_start().strip_prefix('*').unwrap_or("");
        if body.starts_with('/') || body.trim().is_empty() {
            break;
        }
        if let Some(bullet) = body.strip_prefix("  - ") {
            bullets.push(bullet.trim().to_owned());
        } else if let (Some(last), true) = (bullets.last_mut(), body.starts_with("    ")) {
            last.push(' ');
            last.push_str(body.trim());
        } else if !bullets.is_empty() {
            break;
        }
        // Before the first bullet: the block's introduction.
    }
    for bullet in bullets {
        let (names, reason) = bullet.split_once(": ").unwrap_or((&bullet, ""));
        for name in names.split(", ") {
            out.insert(name.trim().to_owned(), reason.trim().to_owned());
        }
    }
    out
}

/// `text` without comments (string literals kept, so a `/*` inside one is not a comment).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                out.push(' ');
            }
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('"', _) => {
                out.push(c);
                while let Some(c) = chars.next() {
                    out.push(c);
                    if c == '\\' {
                        if let Some(n) = chars.next() {
                            out.push(n);
                        }
                    } else if c == '"' {
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Joins lines ending in a backslash with the next.
fn join_continuations(code: &str) -> String {
    code.replace("\\\n", " ")
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn leading_identifier(s: &str) -> Option<String> {
    let name: String = s.chars().take_while(|&c| is_ident(c)).collect();
    name.starts_with(is_ident_start).then_some(name)
}

/// A token: an identifier, a string literal (`"`), a number, or one punctuation character
/// (`::` is one token).
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if is_ident(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push("\"".to_owned());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// Words followed by `(` that are not function names.
const NOT_FUNCTIONS: &[&str] = &[
    "requires",
    "decltype",
    "sizeof",
    "alignof",
    "alignas",
    "noexcept",
    "static_assert",
    "explicit",
    "operator",
    "if",
    "for",
    "while",
    "switch",
    "return",
    "__attribute__",
];

/// What an open brace belongs to.
#[derive(Clone, Debug, PartialEq)]
enum Scope {
    /// `extern "C" {`: does not nest.
    Linkage,
    /// A class body: its member functions are recorded.
    Class(String),
    /// A struct or union body.
    Record,
    /// An enum body: its enumerators are recorded.
    Enum,
    /// Anything else (namespace, function body, initializer).
    Other,
}

impl Scope {
    /// True for the bodies of type definitions, which a declarator may follow
    /// (`typedef struct x { ... } x;`).
    fn is_type_body(&self) -> bool {
        matches!(self, Self::Class(_) | Self::Record | Self::Enum)
    }
}

/// Walks the tokens of a header without preprocessor lines.
fn walk(t: &[String], d: &mut Declarations) {
    let mut scopes: Vec<Scope> = Vec::new();
    // First token of the current statement, per brace level.
    let mut starts: Vec<usize> = Vec::new();
    let mut start = 0usize;
    let mut parens = 0usize;
    let mut pending: Option<Scope> = None;
    // Inside a constructor's member initializer list (`) : a_(x) {`).
    let mut initializers = false;
    let mut i = 0;
    while i < t.len() {
        let tok = t[i].as_str();
        let next = t.get(i + 1).map(String::as_str);
        let prev = i.checked_sub(1).map(|p| t[p].as_str());
        let in_typedef = t.get(start).map(String::as_str) == Some("typedef");
        let innermost = scopes.iter().rev().find(|s| **s != Scope::Linkage).cloned();
        match tok {
            "(" => parens += 1,
            ")" => parens = parens.saturating_sub(1),
            "{" => {
                scopes.push(pending.take().unwrap_or(Scope::Other));
                starts.push(start);
                start = i + 1;
                initializers = false;
            }
            "}" => {
                let outer = starts.pop().unwrap_or(0);
                start = match scopes.pop() {
                    Some(s) if s.is_type_body() => outer,
                    _ => i + 1,
                };
            }
            ";" if parens == 0 => {
                if in_typedef && let Some(name) = typedef_name(&t[start..i]) {
                    d.typedefs.insert(name);
                }
                start = i + 1;
            }
            ":" if parens == 0 && prev == Some(")") => initializers = true,
            "extern" if next == Some("\"") && t.get(i + 2).map(String::as_str) == Some("{") => {
                pending = Some(Scope::Linkage);
            }
            "struct" | "class" | "union" if parens == 0 => {
                let name = next.filter(|n| n.starts_with(is_ident_start));
                let after = t.get(i + 2).map(String::as_str);
                let defines = match name {
                    Some(_) => matches!(after, Some("{" | ":" | "final")),
                    None => next == Some("{"),
                };
                if let (Some(name), "struct") = (name, tok)
                    && (defines || in_typedef)
                {
                    *d.structs.entry(name.to_owned()).or_insert(false) |= defines;
                }
                if defines {
                    pending = Some(match (name, tok) {
                        (Some(name), "class") => {
                            d.classes.insert(name.to_owned());
                            Scope::Class(name.to_owned())
                        }
                        _ => Scope::Record,
                    });
                }
            }
            "enum" if parens == 0 => {
                let mut j = i + 1;
                if matches!(t.get(j).map(String::as_str), Some("class" | "struct")) {
                    j += 1;
                }
                if let Some(name) = t.get(j).filter(|n| n.starts_with(is_ident_start)) {
                    if t.get(j + 1).map(String::as_str) == Some("{") {
                        d.enums.insert(name.clone());
                    }
                    // Skip the tag (and `class`), so it is not read as something else.
                    i = j;
                }
                pending = Some(Scope::Enum);
            }
            "concept" => {
                if let Some(name) = next {
                    d.concepts.insert(name.to_owned());
                }
            }
            "using" if t.get(i + 2).map(String::as_str) == Some("=") => {
                if let Some(name) = next {
                    d.aliases.insert(name.to_owned());
                }
            }
            _ => {}
        }
        let word = tok.starts_with(is_ident_start) && parens == 0;
        if word && innermost == Some(Scope::Enum) && matches!(prev, Some("{" | ",")) {
            d.constants.insert(tok.to_owned());
        }
        let call = word && next == Some("(") && !NOT_FUNCTIONS.contains(&tok) && !initializers;
        match innermost {
            None if call && !in_typedef && prev != Some("::") => {
                d.functions.insert(tok.to_owned());
            }
            Some(Scope::Class(class)) if call => {
                let tilde = if prev == Some("~") { "~" } else { "" };
                d.methods.insert(format!("{class}::{tilde}{tok}"));
            }
            _ => {}
        }
        i += 1;
    }
}

/// The name a `typedef` statement declares: the identifier in `(*NAME)` for function
/// pointers, otherwise the last identifier; both outside braces.
fn typedef_name(stmt: &[String]) -> Option<String> {
    let mut depth = 0usize;
    let mut last = None;
    for (k, tok) in stmt.iter().enumerate() {
        match tok.as_str() {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            "(" if depth == 0 && stmt.get(k + 1).map(String::as_str) == Some("*") => {
                return stmt.get(k + 2).cloned();
            }
            t if depth == 0 && t.starts_with(is_ident_start) => last = Some(t.to_owned()),
            _ => {}
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanner_reads_c_and_cpp_declarations() {
        let header = r#"/*
 * Demo.
 *
 * Reference names left out (why):
 *  - GONE, also_gone: one reason,
 *    continued.
 *  - old_fn: another.
 *
 * Not part of the block: - X: y.
 */
#ifndef DEMO_H
#define DEMO_H
#define LIMIT 3
#define SWAP(x) (x)
enum tag { A = 1, B, C = (2 << 1) };
typedef enum state { S0 = 0 } state;
struct open { int x; void (*cb)(int n); };
typedef struct hidden hidden;
typedef unsigned int code_t;
typedef int (*callback)(void *user, int n);
#ifdef __cplusplus
extern "C" {
#endif
int do_it(struct open *o, int (*f)(int));
const char *name_of(enum tag t);
#ifdef __cplusplus
}
#endif
template <typename T> concept Small = sizeof(T) < 4;
template <typename T> using vec = std::vector<T>;
class Box {
  int helper(int x) { return other(x); }
public:
  Box(int v) : v_(sizeof(int)) {}
  ~Box();
  template <typename T> requires (Small<T>) T get(T t) const noexcept;
};
namespace detail { inline int hidden_fn(int x) { return x; } }
#endif
"#;
        let d = scan(header);
        assert_eq!(
            d.macros,
            ["DEMO_H", "LIMIT", "SWAP"].map(String::from).into()
        );
        assert_eq!(d.constants, ["A", "B", "C", "S0"].map(String::from).into());
        assert_eq!(d.enums, ["state", "tag"].map(String::from).into());
        assert_eq!(
            d.structs,
            [("hidden".to_owned(), false), ("open".to_owned(), true)].into()
        );
        assert_eq!(
            d.typedefs,
            ["callback", "code_t", "hidden", "state"]
                .map(String::from)
                .into()
        );
        assert_eq!(d.functions, ["do_it", "name_of"].map(String::from).into());
        assert_eq!(d.concepts, ["Small"].map(String::from).into());
        assert_eq!(d.aliases, ["vec"].map(String::from).into());
        assert_eq!(d.classes, ["Box"].map(String::from).into());
        assert_eq!(
            d.methods,
            ["Box::Box", "Box::get", "Box::helper", "Box::~Box"]
                .map(String::from)
                .into()
        );
        assert_eq!(
            d.omitted.keys().cloned().collect::<Vec<_>>(),
            ["GONE", "also_gone", "old_fn"]
        );
        assert_eq!(d.omitted["GONE"], "one reason, continued.");
    }
}
