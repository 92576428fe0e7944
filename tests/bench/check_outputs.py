#!/usr/bin/env python3
"""Checks the files of one naaice-bench run: they exist and parse, with the expected rows.

    check_outputs.py --max-size BYTES --reps N [--compared] [--naa-cpu] DIR

* lowlevel.csv: header byte_length,setup_time,transfer_time (spec 8.1), N rows for every
  reference size up to BYTES, positive times;
* middleware.csv: header byte_length,transfer_time, the same rows;
* summary.csv: after "#" lines, one row per size (the reference sizes and 64 B, 4 KiB), the
  medians present and positive (the connect time too; from 1 MiB, with the raw stream, the
  sized stream too); with --compared also the compared CSV's column and the ratio; with
  --naa-cpu (a run with --naa-pid) the NAA process's CPU time per steady RPC, and the header
  naming that process;
* latency.png, bandwidth.png: PNG chunks with valid CRCs, a non-empty image;
* latency.svg, bandwidth.svg: well-formed SVG with the axis text and drawn lines.

Exits 1 with the reason on the first failed check.
"""

import argparse
import csv
import math
import struct
import sys
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path


class CheckError(Exception):
    """A file is missing or wrong."""


def reference_sizes():
    """spec 8.1: s(0) = 1, s(k+1) = round_half_even(1.5 s(k)) below 1 GiB, then 1 GiB."""
    sizes, s = [1], 1
    while True:
        s = round(1.5 * s)  # Python's round is round-half-even
        if s >= 1 << 30:
            return sizes + [1 << 30]
        sizes.append(s)


def positive(value, where):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise CheckError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise CheckError(f"{where}: {value!r} is not a positive number")
    return v


def check_reference_csv(path, header, sizes, reps):
    if not path.is_file():
        raise CheckError(f"{path} missing")
    lines = path.read_text().splitlines()
    if not lines or lines[0] != header:
        raise CheckError(f"{path}: header {lines[:1]}, want {header!r}")
    counts = {}
    for i, row in enumerate(csv.reader(lines[1:]), start=2):
        if len(row) != header.count(",") + 1:
            raise CheckError(f"{path}:{i}: {row}")
        size = int(row[0])
        for value in row[1:]:
            positive(value, f"{path}:{i}")
        counts[size] = counts.get(size, 0) + 1
    want = {s: reps for s in sizes}
    if counts != want:
        raise CheckError(f"{path}: rows per size {counts}, want {want}")


def check_summary(path, sizes, compared, naa_cpu=False):
    if not path.is_file():
        raise CheckError(f"{path} missing")
    text = path.read_text()
    if naa_cpu and "others = the NAA's process" not in text:
        raise CheckError(f"{path}: the header does not say the CPU time is the NAA process's")
    lines = [l for l in text.splitlines() if not l.startswith("#")]
    rows = list(csv.DictReader(lines))
    got = sorted(int(r["byte_length"]) for r in rows)
    want = sorted(set(sizes) | {s for s in (64, 4096) if s <= max(sizes)})
    if got != want:
        raise CheckError(f"{path}: sizes {got}, want {want}")
    columns = ["steady_rpc_us", "steady_rpc_p99_us", "steady_cpu_client_us", "raw_rtt_us", "fresh_setup_us",
               "fresh_register_us", "fresh_mrsp_us", "fresh_transfer_us", "middleware_us", "fresh_connect_us"]
    for r in rows:
        for c in columns:
            positive(r.get(c), f"{path}: {c} of {r['byte_length']}")
        # From 1 MiB with the raw limit: both stream limits (1 MiB messages, sized messages).
        if int(r["byte_length"]) >= 1 << 20 and r.get("raw_stream_MBps"):
            positive(r.get("raw_stream_sized_MBps"), f"{path}: sized stream of {r['byte_length']}")
        if naa_cpu:
            positive(r.get("steady_cpu_others_us"), f"{path}: NAA CPU of {r['byte_length']}")
        if compared and int(r["byte_length"]) in sizes:
            positive(r.get("compare_transfer_us"), f"{path}: compare of {r['byte_length']}")
            positive(r.get("fresh_vs_compare"), f"{path}: ratio of {r['byte_length']}")


def check_png(path):
    if not path.is_file():
        raise CheckError(f"{path} missing")
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise CheckError(f"{path}: not a PNG")
    pos, chunks, width, height = 8, [], 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise CheckError(f"{path}: bad CRC in chunk {kind!r}")
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        chunks.append(kind)
        pos += 12 + length
    if chunks[:1] != [b"IHDR"] or chunks[-1:] != [b"IEND"] or b"IDAT" not in chunks:
        raise CheckError(f"{path}: chunks {chunks}")
    if width < 100 or height < 100:
        raise CheckError(f"{path}: {width}x{height}")


def check_svg(path):
    if not path.is_file():
        raise CheckError(f"{path} missing")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise CheckError(f"{path}: {e}") from None
    if not root.tag.endswith("svg"):
        raise CheckError(f"{path}: root element {root.tag}")
    texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    if "bytes each way" not in texts:
        raise CheckError(f"{path}: no axis label")
    if not any(e.tag.endswith(("polyline", "path")) for e in root.iter()):
        raise CheckError(f"{path}: no lines drawn")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-size", type=int, required=True)
    parser.add_argument("--reps", type=int, required=True)
    parser.add_argument("--compared", action="store_true")
    parser.add_argument("--naa-cpu", action="store_true")
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    sizes = [s for s in reference_sizes() if s <= args.max_size]
    try:
        check_reference_csv(args.dir / "lowlevel.csv", "byte_length,setup_time,transfer_time",
                            sizes, args.reps)
        check_reference_csv(args.dir / "middleware.csv", "byte_length,transfer_time", sizes,
                            args.reps)
        check_summary(args.dir / "summary.csv", sizes, args.compared, args.naa_cpu)
        for name in ("latency", "bandwidth"):
            check_png(args.dir / f"{name}.png")
            check_svg(args.dir / f"{name}.svg")
    except CheckError as e:
        print(f"check_outputs: {e}", file=sys.stderr)
        return 1
    print(f"check_outputs: {args.dir}: CSVs and plots OK ({len(sizes)} reference sizes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
