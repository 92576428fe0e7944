#!/usr/bin/env python3
"""Ratios of the Soft-RoCE benchmark: the project's RPCs against perftest in the same VM run.

    bench_report.py OUT

OUT is the directory bench-guest.sh filled (bench.sh runs both):

* perftest/<round>/ib_write_lat-<size>.txt, ib_write_bw-<size>.txt: perftest client output.
  Latency: t_typical (perftest's median one-way latency, usec). Bandwidth: BW average, in
  perftest's MB/sec, which are MiB/s. ib_send_lat-<size>.txt (small sizes, when present): the
  SEND/RECV ping-pong, whose receiver learns of each message from a completion, as the RPC's
  receivers do (ib_write_lat's receiver polls the last byte of its buffer instead): a second,
  informational reference. rpc_floor-<size>.txt (when bench.sh built the floor): the bare verbs
  operations of an RPC (floor/rpc_floor.c: WRITE WITH IMMEDIATE each way through the receive
  queue, registration plus one SEND each way for the setup, both sides busy-polling), medians
  in usec; read here: steady_us, first_us, setup_us. The floor tells whether a target can be
  reached at all in that run, and how far the RPC is from the device's own cost.
* rpc/<round>/summary.txt: naaice-bench's summary CSV after "#" comment lines, one row per size;
  read here: steady_rpc_us, fresh_transfer_us, fresh_setup_us (medians in usec; fresh = a new
  connection: setup = registration + MRSP, transfer = its first RPC), and the CPU time per
  steady RPC, steady_cpu_client_us and steady_cpu_others_us: the NAA's, from its own process when
  the summary's header says "others = the NAA's process" (bench.sh's default: naaice-swnaa
  beside naaice-bench, --naa-pid), else naaice-bench's other threads (its in-process NAA).

naaice-bench round k ran between perftest rounds k-1 and k, so each RPC figure is compared with the
better of those two perftest figures (the lower latency, the higher bandwidth): the limit of the
transport in that stretch of the run. Under emulation perftest's own latency is bimodal (one-way
15-17 us in most runs, 30-45 us in some), and a mean would flatter the RPC whenever one round was
slow. A ratio is the median over the rounds. Prints the report and
writes it to OUT/report.txt. Exits 1 when a measurement is missing, 0 otherwise (missed targets
are reported, not errors: emulation makes absolute numbers meaningless and ratios noisy).
"""

import csv
import math
import statistics
import sys
from pathlib import Path

SMALL_MAX = 4096  # "small RPC": up to 4 KiB
LARGE_MIN = 1 << 20  # "large RPC": from 1 MiB
TARGET_STEADY = 1.5  # steady-state small RPC <= 1.5 x 2*ib_write_lat
TARGET_FIRST = 3.0  # first RPC of a fresh connection <= 3 x 2*ib_write_lat
TARGET_BW = 0.95  # large RPC bandwidth (2*size per RPC) >= 0.95 x ib_write_bw
MIB = 1 << 20


class ReportError(Exception):
    """A measurement file is missing or unreadable."""


def perftest_row(path):
    """The numbers of the result line under perftest's ' #bytes' header (None when perftest
    printed inf or nan: its clock calibration failed)."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#bytes") and i + 1 < len(lines):
            row = [float(x) for x in lines[i + 1].split()]
            if not all(math.isfinite(x) for x in row):
                print(f"bench_report: ignoring {path}: non-finite figures", file=sys.stderr)
                return None
            return row
    raise ReportError(f"{path}: no result line")


def floor_row(path):
    """(steady_us, first_us, setup_us) of an rpc_floor output (header line, then values)."""
    lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
    if len(lines) < 2 or lines[0][0] != "#bytes":
        raise ReportError(f"{path}: not rpc_floor's output")
    cells = dict(zip(lines[0], lines[1]))
    try:
        return tuple(float(cells[k]) for k in ("steady_us", "first_us", "setup_us"))
    except KeyError as e:
        raise ReportError(f"{path}: no column {e}") from None


def perftest_round(directory):
    """{size: (lat_typical_us, bw_bytes_per_s, send_lat_typical_us, floor)} of one perftest
    round, floor = (steady_us, first_us, setup_us) of rpc_floor (missing parts None)."""
    lat, bw, send, floor = {}, {}, {}, {}
    for f in directory.glob("ib_write_lat-*.txt"):
        row = perftest_row(f)
        if row:
            lat[int(row[0])] = row[4]  # bytes iters t_min t_max t_typical ...
    for f in directory.glob("ib_write_bw-*.txt"):
        row = perftest_row(f)
        if row:
            bw[int(row[0])] = row[3] * MIB  # bytes iters peak average msgrate
    for f in directory.glob("ib_send_lat-*.txt"):
        row = perftest_row(f)
        if row:
            send[int(row[0])] = row[4]
    for f in directory.glob("rpc_floor-*.txt"):
        floor[int(f.stem.rsplit("-", 1)[1])] = floor_row(f)
    return {
        s: (lat.get(s), bw.get(s), send.get(s), floor.get(s)) for s in set(lat) | set(bw)
    }




def number(text):
    """A summary cell: a float, or None when naaice-bench left it empty (not measured)."""
    return float(text) if text else None


def rpc_round(directory):
    """{size: (steady_us, first_rpc_us, setup_us, cpu_client_us, cpu_others_us)} of one
    naaice-bench round (CPU None in summaries written before it was measured)."""
    summary = directory / "summary.txt"
    if not summary.exists():
        raise ReportError(f"{directory}: naaice-bench wrote no summary.txt")
    text = [line for line in summary.read_text().splitlines() if not line.startswith("#")]
    if not text or not text[0].startswith("byte_length,"):
        raise ReportError(f"{summary}: not naaice-bench's summary CSV")
    out = {}
    for row in csv.DictReader(text):
        out[int(row["byte_length"])] = (
            number(row["steady_rpc_us"]),
            number(row["fresh_transfer_us"]),
            number(row["fresh_setup_us"]),
            number(row.get("steady_cpu_client_us")),
            number(row.get("steady_cpu_others_us")),
        )
    return out


def naa_arrangement(directory):
    """Where the NAA of one naaice-bench round ran, from its summary's header."""
    summary = directory / "summary.txt"
    text = summary.read_text() if summary.exists() else ""
    return "its own process" if "others = the NAA's process" in text else "naaice-bench's process"


def best_of(values, pick):
    """The best figure (`pick` is min or max), None if there is none."""
    values = [v for v in values if v is not None]
    return pick(values) if values else None


def median_of(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec=".2f", none="-"):
    return none if v is None else format(v, spec)


def verdict(ok):
    return "MET" if ok else "MISSED"


def floor_note(rows, key, worst):
    """'; the bare-verbs floor: X.XXx' over the rows that have the floor's ratio `key`."""
    values = [r[key] for r in rows if r[key] is not None]
    return f"; the bare-verbs floor: {worst(values):.2f}x" if values else ""


def report(out):
    perf_dirs = sorted((out / "perftest").glob("[0-9]*"), key=lambda p: int(p.name))
    rpc_dirs = sorted((out / "rpc").glob("[0-9]*"), key=lambda p: int(p.name))
    if not perf_dirs or not rpc_dirs:
        raise ReportError(f"{out}: no perftest or naaice-bench rounds")
    perf = {int(d.name): perftest_round(d) for d in perf_dirs}
    rpc = {int(d.name): rpc_round(d) for d in rpc_dirs}
    sizes = sorted(set().union(*(set(p) for p in perf.values())))
    if not sizes:
        raise ReportError(f"{out}: perftest produced no results")

    # Per size: lists over the rpc rounds of (perftest around the round, rpc figures).
    rows = []
    for size in sizes:
        lat2, bw, steady, first, setup, cpu_client, cpu_others = [], [], [], [], [], [], []
        r_steady, r_first, r_bw, r_send = [], [], [], []
        # The floor: its own ratios to perftest (can the target be reached?), and the RPC's
        # ratios to it (how far is the RPC from the device's cost?).
        f_steady, f_first, f_bw, f_setup = [], [], [], []
        v_steady, v_first, v_setup = [], [], []
        for k, figures in sorted(rpc.items()):
            if size not in figures:
                continue
            around = [perf.get(k - 1, {}).get(size), perf.get(k, {}).get(size)]
            lat = best_of([a[0] for a in around if a], min)
            wbw = best_of([a[1] for a in around if a], max)
            send = best_of([a[2] for a in around if a], min)
            floors = [a[3] for a in around if a and a[3]]
            fl = [best_of([x[i] for x in floors], min) for i in range(3)]
            s, f, u, cc, co = figures[size]
            cpu_client.append(cc)
            cpu_others.append(co)
            lat2.append(None if lat is None else 2 * lat)
            bw.append(wbw)
            steady.append(s)
            first.append(f)
            setup.append(u)
            if lat and s:
                r_steady.append(s / (2 * lat))
            if lat and f:
                r_first.append(f / (2 * lat))
            if send and s:
                r_send.append(s / (2 * send))
            if wbw and s:
                r_bw.append((2 * size / (s * 1e-6)) / wbw)
            if lat and fl[0]:
                f_steady.append(fl[0] / (2 * lat))
                f_first.append(fl[1] / (2 * lat))
                f_setup.append(fl[2] / (2 * lat))
            if wbw and fl[0]:
                f_bw.append((2 * size / (fl[0] * 1e-6)) / wbw)
            for ours, bare, ratios in ((s, fl[0], v_steady), (f, fl[1], v_first), (u, fl[2], v_setup)):
                if ours and bare:
                    ratios.append(ours / bare)
        if not steady:
            continue
        rows.append(
            {
                "size": size,
                "lat2": median_of(lat2),
                "bw": median_of(bw),
                "steady": median_of(steady),
                "first": median_of(first),
                "setup": median_of(setup),
                "cpu_client": median_of(cpu_client),
                "cpu_others": median_of(cpu_others),
                "r_steady": median_of(r_steady),
                "r_first": median_of(r_first),
                "r_bw": median_of(r_bw),
                "r_send": median_of(r_send),
                "f_steady": median_of(f_steady),
                "f_first": median_of(f_first),
                "f_bw": median_of(f_bw),
                "f_setup": median_of(f_setup),
                "v_steady": median_of(v_steady),
                "v_first": median_of(v_first),
                "v_setup": median_of(v_setup),
            }
        )
    if not rows:
        raise ReportError(f"{out}: no size measured by both perftest and naaice-bench")

    lines = [
        f"Soft-RoCE benchmark: {out}",
        f"{len(rpc)} naaice-bench round(s) interleaved with {len(perf)} perftest round(s); "
        "every figure is a median, every ratio compares figures of the same VM run.",
        "Under emulation absolute numbers mean little; the ratios are the result.",
        "",
        f"{'bytes':>9} | {'2*lat us':>9} {'write_bw MB/s':>13} | {'steady us':>10} {'first us':>10} "
        f"{'setup us':>10} | {'steady/2lat':>11} {'first/2lat':>10} {'rpc bw/bw':>9} | "
        f"{'steady/2send':>12} | {'cpu cli us':>10} {'cpu naa us':>10}",
    ]
    for r in rows:
        lines.append(
            f"{r['size']:>9} | {fmt(r['lat2'], '.1f'):>9} {fmt(r['bw'] and r['bw'] / 1e6, '.1f'):>13} | "
            f"{fmt(r['steady'], '.1f'):>10} {fmt(r['first'], '.1f'):>10} {fmt(r['setup'], '.1f'):>10} | "
            f"{fmt(r['r_steady']):>11} {fmt(r['r_first']):>10} {fmt(r['r_bw']):>9} | "
            f"{fmt(r['r_send']):>12} | "
            f"{fmt(r['cpu_client'], '.1f'):>10} {fmt(r['cpu_others'], '.1f'):>10}"
        )
    where = " / ".join(sorted({naa_arrangement(d) for d in rpc_dirs}))
    lines.append(f"(cpu: CPU time per steady RPC of the client thread and of the NAA, in {where};")
    lines.append(" 2send: 2*ib_send_lat, a SEND/RECV ping-pong completing through the CQ like the RPC)")
    lines.append("")
    floored = [r for r in rows if r["v_steady"] is not None]
    if floored:
        lines.append(
            "The bare-verbs floor (rpc_floor): the RPC's verbs operations alone, both sides polling."
        )
        lines.append(
            f"{'bytes':>9} | {'floor: steady/2lat':>18} {'first/2lat':>10} {'setup/2lat':>10} "
            f"{'bw/bw':>6} | {'RPC/floor: steady':>17} {'first':>6} {'setup':>6}"
        )
        for r in floored:
            lines.append(
                f"{r['size']:>9} | {fmt(r['f_steady']):>18} {fmt(r['f_first']):>10} "
                f"{fmt(r['f_setup']):>10} {fmt(r['f_bw']):>6} | {fmt(r['v_steady']):>17} "
                f"{fmt(r['v_first']):>6} {fmt(r['v_setup']):>6}"
            )
        lines.append("")

    small = [r for r in rows if r["size"] <= SMALL_MAX]
    large = [r for r in rows if r["size"] >= LARGE_MIN]
    missing = []
    if small:
        steady = [r["r_steady"] for r in small if r["r_steady"] is not None]
        first = [r["r_first"] for r in small if r["r_first"] is not None]
        if steady:
            worst = max(steady)
            lines.append(
                f"small RPC (<= 4 KiB), steady state / 2*ib_write_lat: worst {worst:.2f}x over "
                f"{len(steady)} size(s)  (target <= {TARGET_STEADY}x: {verdict(worst <= TARGET_STEADY)})"
                + floor_note(small, "f_steady", max)
            )
        else:
            missing.append("steady-state small RPC ratio")
        sends = [r["r_send"] for r in small if r["r_send"] is not None]
        if sends:
            lines.append(
                f"small RPC (<= 4 KiB), steady state / 2*ib_send_lat: worst {max(sends):.2f}x "
                "(informational: the same ping-pong through completions)"
            )
        if first:
            worst = max(first)
            lines.append(
                f"small RPC (<= 4 KiB), first RPC of a connection / 2*ib_write_lat: worst {worst:.2f}x "
                f"(target <= {TARGET_FIRST}x: {verdict(worst <= TARGET_FIRST)})"
                + floor_note(small, "f_first", max)
            )
        else:
            missing.append("first-RPC ratio")
    else:
        missing.append("small sizes (<= 4 KiB)")
    if large:
        bw = [r["r_bw"] for r in large if r["r_bw"] is not None]
        if bw:
            worst = min(bw)
            lines.append(
                f"large RPC (>= 1 MiB), bandwidth 2*size/RPC / ib_write_bw: worst {worst:.2f}x over "
                f"{len(bw)} size(s)  (target >= {TARGET_BW}x: {verdict(worst >= TARGET_BW)})"
                + floor_note(large, "f_bw", min)
            )
        else:
            missing.append("large RPC bandwidth ratio")
    else:
        missing.append("large sizes (>= 1 MiB)")
    setups = [r for r in rows if r["setup"] is not None]
    if setups:
        parts = [f"{r['size']} B: {r['setup']:.1f} us" for r in setups]
        line = "setup time (registration + MRSP) of a fresh connection: " + ", ".join(parts)
        base = rows[0]
        if base["lat2"] and base["setup"] is not None:
            # The MRSP is one small SEND each way, like one small round trip.
            line += (
                f"  (at {base['size']} B: {base['setup'] / base['lat2']:.2f}x "
                f"2*ib_write_lat({base['size']} B) = {base['lat2']:.1f} us"
                + (
                    ""
                    if base["f_setup"] is None
                    else f"; the bare-verbs floor: {base['f_setup']:.2f}x"
                )
                + ")"
            )
        lines.append(line)
    else:
        missing.append("setup time")
    text = "\n".join(lines) + "\n"
    if missing:
        text += "missing: " + ", ".join(missing) + "\n"
    return text, not missing


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = Path(argv[1])
    try:
        text, complete = report(out)
    except (ReportError, OSError, ValueError, KeyError, IndexError) as e:
        print(f"bench_report: {e}", file=sys.stderr)
        return 1
    print(text, end="")
    (out / "report.txt").write_text(text)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
