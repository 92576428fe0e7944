#!/usr/bin/env python3
"""Checks ARCHITECTURE.md's claim that no module imports one that imports it back.

For every crate of the workspace it reads the `crate::`, `super::` and `self::` paths of each
source file (in `use` items and in code), resolves each to the module file that defines the
item (following one level of `pub use child::Item` re-exports in a parent module, as a
structure viewer does), and draws an edge between two modules when neither contains the
other (a child using its parent's items, and a parent re-exporting its children, are the
module tree itself, not arrows). Tests (`#[cfg(test)]` modules) are left out. Any cycle among
these edges fails the check, naming it.

    .ci/module-cycles.py [ROOT]     # exit status 1 and the cycles when there are any
"""

import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)

CRATE_ROOTS = ["src/lib.rs", "src/main.rs"]
USE_RE = re.compile(r"\buse\s+((?:crate|super|self)(?:::[^;]*)?);", re.S)
INLINE_RE = re.compile(r"\b((?:crate|super)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
STRING_RE = re.compile(r'"(?:\\.|[^"\\])*"')


def code(path):
    """A file's code without comments, string contents and test-only items (each
    `#[cfg(test)]` item: up to its `;` or its balanced `{ ... }`)."""
    text = STRING_RE.sub('""', COMMENT_RE.sub("", path.read_text()))
    out, i = [], 0
    while True:
        at = text.find("#[cfg(test)]", i)
        if at < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:at])
        j = at + len("#[cfg(test)]")
        # The item ends at the first `;` before any `{`, or with the brace that closes the
        # first `{`.
        semi, brace = text.find(";", j), text.find("{", j)
        if brace < 0 or 0 <= semi < brace:
            i = semi + 1 if semi >= 0 else len(text)
            continue
        depth, k = 0, brace
        while k < len(text):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        i = k


def crates(root):
    """Every crate source folder: (name, src folder, root file)."""
    for manifest in sorted(root.rglob("Cargo.toml")):
        if "target" in manifest.parts or ".git" in manifest.parts:
            continue
        base = manifest.parent
        for r in CRATE_ROOTS:
            if (base / r).exists():
                yield base.relative_to(root), base / "src", base / r


def modules(src, root_file):
    """Module path (tuple) -> file, for the files under `src` reachable as modules."""
    found = {(): root_file}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src)
        if rel.parts[0] == "bin" or f == root_file:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "mod":
            parts.pop()
        if parts in (["lib"], ["main"]):
            continue
        found[tuple(parts)] = f
    return found


def expand(path):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    path = re.sub(r"\s+", "", path)
    m = re.match(r"^(.*?)\{(.*)\}$", path)
    if not m:
        return [path]
    head, body = m.groups()
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    out = []
    for p in parts:
        for e in expand(p):
            out.append(head + e if e != "self" else head.rstrip(":"))
    return out


def absolute(path, here):
    """A `crate::`/`super::`/`self::` path as segments from the crate root."""
    segs = [s for s in path.split("::") if s]
    base = list(here)
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    while segs and segs[0] in ("super", "self"):
        if segs[0] == "super":
            base = base[:-1]
        segs = segs[1:]
    return base + [re.sub(r"\s+as\s+.*$", "", s) for s in segs if s != "*"]


def reexports(text):
    """Item name -> the child module a `pub use child::...::Item` takes it from."""
    out = {}
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text, re.S):
        for p in expand(m.group(1)):
            segs = [s for s in re.sub(r"\s+as\s+\w+$", "", p).split("::") if s]
            if len(segs) >= 2 and segs[0] not in ("crate", "super", "self", "std", "core"):
                alias = re.search(r"\bas\s+(\w+)$", p)
                out[alias.group(1) if alias else segs[-1]] = segs[0]
    return out


def resolve(segs, mods, texts):
    """The module that defines the item at `segs`."""
    mod = ()
    for s in segs:
        if mod + (s,) in mods:
            mod = mod + (s,)
        else:
            child = reexports(texts[mod]).get(s)
            if child and mod + (child,) in mods:
                return mod + (child,)
            break
    return mod


def contains(a, b):
    return b[: len(a)] == a


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main():
    bad = 0
    checked = 0
    for name, src, root_file in crates(ROOT):
        mods = modules(src, root_file)
        texts = {m: code(f) for m, f in mods.items()}
        edges = {}
        for m, text in texts.items():
            paths = [p for u in USE_RE.finditer(text) for p in expand(u.group(1))]
            paths += INLINE_RE.findall(text)
            for p in paths:
                target = resolve(absolute(p, m), mods, texts)
                if not contains(target, m) and not contains(m, target):
                    edges.setdefault(m, set()).add(target)
        checked += len(mods)
        for comp in cycles(edges):
            bad += 1
            names = sorted("::".join(c) or "(root)" for c in comp)
            print(f"{name}: modules that import each other: {', '.join(names)}")
            for a in comp:
                for b in sorted(edges.get(a, ())):
                    if b in comp:
                        print(f"    {mods[a].relative_to(ROOT)} -> {'::'.join(b)}")
    print(f"module-cycles: {checked} modules checked, {bad} cycle(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
