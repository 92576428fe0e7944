#!/usr/bin/env bash
# Checks the documentation's references (README.md, ARCHITECTURE.md, CONTRIBUTING.md,
# docs/**/*.md):
#   * every relative link or image points to a file or directory that exists, and a
#     `#fragment` to a heading of the target Markdown file (GitHub's heading ids);
#   * every code block that names its source in the info string (```rust file=PATH) is a
#     verbatim excerpt of that file: its lines appear in the file, in order, one after
#     another. The compiled programs are the truth; the docs show parts of them.
# External links (http, https, mailto) are not fetched.
#
# Usage: .ci/doc-links.sh
set -euo pipefail
cd "$(dirname "$0")/.."

python3 - "$@" <<'EOF'
import os
import re
import sys
import unicodedata

docs = [f for f in ("README.md", "ARCHITECTURE.md", "CONTRIBUTING.md") if os.path.exists(f)]
for root, _, files in os.walk("docs"):
    if "/target" in root or root.endswith("target"):
        continue
    docs += [os.path.join(root, f) for f in sorted(files) if f.endswith(".md")]

FENCE = re.compile(r"^(```+|~~~+)(.*)$")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def slug(heading):
    """GitHub's id of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_" or cat[0] in "LN":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def parse(path):
    """(prose lines with their numbers, code blocks, heading ids) of a Markdown file."""
    prose, blocks, ids, seen = [], [], set(), {}
    fence = None
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if fence is None and m:
                fence = (m.group(1), m.group(2).strip(), no, [])
                continue
            if fence is not None:
                if line.strip() == fence[0]:
                    blocks.append(fence)
                    fence = None
                else:
                    fence[3].append(line)
                continue
            prose.append((no, line))
            h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if h:
                base = slug(h.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                ids.add(base if n == 0 else f"{base}-{n}")
    return prose, blocks, ids


cache = {}


def ids_of(path):
    if path not in cache:
        cache[path] = parse(path)[2]
    return cache[path]


errors = []
links = excerpts = 0
for doc in docs:
    prose, blocks, ids = parse(doc)
    base = os.path.dirname(doc)
    for no, line in prose:
        # Inline code spans are not links.
        line = re.sub(r"`[^`]*`", "", line)
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            links += 1
            path, _, frag = target.partition("#")
            full = os.path.normpath(os.path.join(base, path)) if path else doc
            if not os.path.exists(full):
                errors.append(f"{doc}:{no}: {target}: {full} does not exist")
                continue
            if frag and full.endswith(".md") and frag not in ids_of(full):
                errors.append(f"{doc}:{no}: {target}: no heading #{frag} in {full}")
    for _, info, no, lines in blocks:
        m = re.search(r"(?:^|\s)file=(\S+)", info)
        if not m:
            continue
        excerpts += 1
        src = m.group(1)
        if not os.path.isfile(src):
            errors.append(f"{doc}:{no}: file={src} does not exist")
            continue
        with open(src, encoding="utf-8") as f:
            have = [l.rstrip() for l in f.read().split("\n")]
        want = [l.rstrip() for l in lines]
        n = len(want)
        if not any(have[i : i + n] == want for i in range(len(have) - n + 1)):
            errors.append(f"{doc}:{no}: the block is not an excerpt of {src} (lines differ)")

for e in errors:
    print(e, file=sys.stderr)
print(f"doc-links: {len(docs)} files, {links} relative links, {excerpts} excerpts checked; "
      f"{len(errors)} errors")
sys.exit(1 if errors else 0)
EOF
