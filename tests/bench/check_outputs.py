#!/usr/bin/env python3
"""Checks the files of one naaice-bench run: they exist and parse, with the expected rows.

    check_outputs.py --max-size BYTES --reps N [--compared] [--naa-cpu] DIR
    check_outputs.py --clients N,... --sizes BYTES,... [--mode M] [--api A] [--overlap]
                     [--isolation] [--naa-cpu] DIR

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

With --clients (a `naaice-bench --clients` run):

* clients.csv: after "#" lines, the columns below; a row per N and size in --mode (and in
  mode overlap with --overlap), positive rates, latencies, CPU time of the clients (and of
  the NAA with --naa-cpu), the raw echo's rate and the ratio rpc_vs_raw, the fairness
  slowest_vs_mean in (0, 1];
* clients.json: parses, the same rows;
* isolation.csv (--isolation): a row per N from 2, the small clients' p99 alone and beside
  the big client, the big client's transfer time and the rise;
* clients-throughput.png/.svg: as above, the SVG with the axis "clients (connections)".

Exits 1 with the reason on the first failed check.
"""

import argparse
import csv
import json
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


def check_svg(path, axis="bytes each way"):
    if not path.is_file():
        raise CheckError(f"{path} missing")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise CheckError(f"{path}: {e}") from None
    if not root.tag.endswith("svg"):
        raise CheckError(f"{path}: root element {root.tag}")
    texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    if axis not in texts:
        raise CheckError(f"{path}: no axis label")
    if not any(e.tag.endswith(("polyline", "path")) for e in root.iter()):
        raise CheckError(f"{path}: no lines drawn")


CLIENT_COLUMNS = [
    "mode", "api", "clients", "bytes", "rpcs", "rpc_per_s", "GBps", "p50_us", "p99_us",
    "slowest_vs_mean", "client_cpu_us_per_rpc", "client_vcsw_per_rpc", "client_ivcsw_per_rpc",
    "naa_cpu_us_per_rpc", "naa_vcsw_per_rpc", "naa_ivcsw_per_rpc", "raw_rpcs", "raw_rpc_per_s",
    "raw_GBps", "raw_p50_us", "raw_p99_us", "raw_slowest_vs_mean", "raw_client_cpu_us_per_rpc",
    "raw_client_vcsw_per_rpc", "raw_client_ivcsw_per_rpc", "raw_server_cpu_us_per_rpc",
    "raw_server_vcsw_per_rpc", "raw_server_ivcsw_per_rpc", "rpc_vs_raw",
]
ISOLATION_COLUMNS = [
    "mode", "api", "clients", "small_bytes", "big_bytes", "small_p99_alone_us",
    "small_p99_with_big_us", "small_rpc_per_s_alone", "small_rpc_per_s_with_big", "big_p50_us",
    "big_rpcs", "p99_rise_vs_big",
]


def read_csv(path, columns):
    if not path.is_file():
        raise CheckError(f"{path} missing")
    lines = [l for l in path.read_text().splitlines() if not l.startswith("#")]
    reader = csv.DictReader(lines)
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        raise CheckError(f"{path}: no columns {missing}")
    return list(reader)


def check_clients(args):
    ns = [int(n) for n in args.clients.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    path = args.dir / "clients.csv"
    rows = read_csv(path, CLIENT_COLUMNS)
    modes = [args.mode] + (["overlap"] if args.overlap else [])
    want = sorted((m, n, s) for m in modes for n in ns for s in sizes)
    got = sorted((r["mode"], int(r["clients"]), int(r["bytes"])) for r in rows)
    if got != want:
        raise CheckError(f"{path}: rows (mode, clients, bytes) {got}, want {want}")
    for r in rows:
        where = f"{path}: {r['mode']} N={r['clients']} {r['bytes']} B"
        if r["api"] != args.api:
            raise CheckError(f"{where}: api {r['api']}, want {args.api}")
        columns = ["rpcs", "rpc_per_s", "GBps", "p50_us", "p99_us", "slowest_vs_mean",
                   "client_cpu_us_per_rpc", "raw_rpc_per_s", "raw_p99_us", "rpc_vs_raw",
                   "raw_client_cpu_us_per_rpc", "raw_server_cpu_us_per_rpc"]
        if args.naa_cpu:
            columns.append("naa_cpu_us_per_rpc")
        for c in columns:
            positive(r.get(c), f"{where}: {c}")
        for c in ("slowest_vs_mean", "raw_slowest_vs_mean"):
            if float(r[c]) > 1.0 + 1e-9:
                raise CheckError(f"{where}: {c} {r[c]} is over 1")
        for c in ("client_vcsw_per_rpc", "client_ivcsw_per_rpc"):
            if float(r[c]) < 0:
                raise CheckError(f"{where}: {c} {r[c]} is negative")
    document = json.loads((args.dir / "clients.json").read_text())
    if len(document.get("rows", [])) != len(rows):
        raise CheckError(f"clients.json: {len(document.get('rows', []))} rows, CSV {len(rows)}")
    if args.isolation:
        path = args.dir / "isolation.csv"
        iso = read_csv(path, ISOLATION_COLUMNS)
        want = sorted(n for n in ns if n >= 2)
        if sorted(int(r["clients"]) for r in iso) != want:
            raise CheckError(f"{path}: rows for N {[r['clients'] for r in iso]}, want {want}")
        for r in iso:
            for c in ("small_p99_alone_us", "small_p99_with_big_us", "big_p50_us", "big_rpcs"):
                positive(r.get(c), f"{path}: N={r['clients']} {c}")
            if float(r["p99_rise_vs_big"]) < 0:
                raise CheckError(f"{path}: negative rise")
    if not args.no_plots:
        check_png(args.dir / "clients-throughput.png")
        check_svg(args.dir / "clients-throughput.svg", "clients (connections)")
    return f"{len(rows)} rows"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-size", type=int)
    parser.add_argument("--reps", type=int)
    parser.add_argument("--compared", action="store_true")
    parser.add_argument("--naa-cpu", action="store_true")
    parser.add_argument("--clients", help="a --clients run: its N list")
    parser.add_argument("--sizes", default="64", help="with --clients: its --size list in bytes")
    parser.add_argument("--mode", default="threads", help="with --clients: threads or processes")
    parser.add_argument("--api", default="rust", help="with --clients: rust or c")
    parser.add_argument("--overlap", action="store_true")
    parser.add_argument("--isolation", action="store_true")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    if args.clients:
        try:
            what = check_clients(args)
        except (CheckError, ValueError, KeyError) as e:
            print(f"check_outputs: {e}", file=sys.stderr)
            return 1
        print(f"check_outputs: {args.dir}: clients CSV/JSON and plot OK ({what})")
        return 0
    if args.max_size is None or args.reps is None:
        parser.error("--max-size and --reps are required without --clients")
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
