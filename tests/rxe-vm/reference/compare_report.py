#!/usr/bin/env python3
"""compare_report.py OUT -- the tables of a compare.sh run (files of compare-guest.sh).

  (a) naa_create of the two clients against the same NAA: the first iteration of a client
      process (cold: the library's and the device's first use in the process) and the other
      iterations (warm), per NAA and size; the ratio naaice-rs / reference is taken per round
      (both clients ran against the same NAA process in it; iterations a failed run completed
      count) and summarised over the rounds. Also the first naa_create counted from the exec
      of the client process: the reference's libraries are loaded before main, naaice-rs
      loads rdma-core inside its first naa_create.
  (b) the first RPC (naa_invoke + naa_wait) on a freshly started NAA: the first iteration of
      the client that ran first on it, naaice-swnaa against the reference's NAA, per client
      and size; the ratio swnaa / reference is taken per round (both NAAs fresh in it, the
      same client first). For context, the same client's first iteration in the rounds where
      it ran second (a cold client on an NAA that has served one client).

Values are microseconds under emulation (qemu TCG): only ratios within a run mean something.
"median [min-max] n" everywhere; a ratio below 1 means naaice-rs is faster.
"""
import os
import statistics
import sys
from collections import defaultdict

NAAS = {"swnaa": "naaice-swnaa", "ref": "C ref NAA"}
CLIENTS = {"rs": "naaice-rs", "ref": "C ref"}


def read_out(path):
    """(create_us, first_us) per iteration, early_waits and exec_create_us (None when
    missing)."""
    rows, early, exec_create = [], None, None
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if line.startswith("median"):
                    if "early_waits" in parts:
                        early = int(parts[parts.index("early_waits") + 1])
                    if "exec_create_us" in parts:
                        exec_create = float(parts[parts.index("exec_create_us") + 1])
                    continue
                if len(parts) == 2:
                    try:
                        rows.append((float(parts[0]), float(parts[1])))
                    except ValueError:
                        pass
    except FileNotFoundError:
        pass
    return rows, early, exec_create


def fmt(values, scale=1.0, digits=0):
    if not values:
        return "-"
    v = [x * scale for x in values]
    med = statistics.median(v)
    return f"{med:.{digits}f} [{min(v):.{digits}f}-{max(v):.{digits}f}] {len(v)}"


def fmt_ms(values):
    return fmt(values, 1e-3, 1)


def fmt_ratio(values):
    return fmt(values, 1.0, 2)


def pick(runs, **fields):
    """The runs whose fields have the given values."""
    return [r for r in runs if all(r[k] == v for k, v in fields.items())]


def header(p, hdr):
    """Prints a table's header line and its rule."""
    p(hdr)
    p("-" * len(hdr))


def main(out):
    runs = []
    with open(os.path.join(out, "runs.txt")) as f:
        for line in f:
            p = line.split()
            if len(p) == 6:
                rnd, size, naa, client, pos, rc = p
                rows, early, exec_create = read_out(
                    os.path.join(out, f"r{rnd}", size, f"{naa}.{client}.out"))
                runs.append(dict(round=int(rnd), size=int(size), naa=naa, client=client,
                                 pos=int(pos), rc=int(rc), rows=rows, early=early,
                                 exec_create=exec_create))
    if not runs:
        print("no runs")
        return 1
    sizes = sorted({r["size"] for r in runs})
    by = {(r["round"], r["size"], r["naa"], r["client"]): r for r in runs}
    lines = []
    p = lines.append

    p("Runs (client processes): rc 0 / all, failures by exit status, iterations where naa_wait")
    p("returned before the RPC finished (create_time waits again; 'early')")
    for naa in NAAS:
        for client in CLIENTS:
            sel = [r for r in runs if r["naa"] == naa and r["client"] == client]
            if not sel:
                continue
            ok = sum(1 for r in sel if r["rc"] == 0)
            bad = defaultdict(int)
            for r in sel:
                if r["rc"]:
                    bad[r["rc"]] += 1
            early = sum(r["early"] or 0 for r in sel)
            iters = sum(len(r["rows"]) for r in sel)
            badtxt = ", ".join(f"rc {k}: {v}" for k, v in sorted(bad.items())) or "none"
            p(f"  {CLIENTS[client]:>9} client -> {NAAS[naa]:<12}: {ok}/{len(sel)} ok "
              f"(failed: {badtxt}); {iters} iterations completed, early {early}")
    p("")

    p("(a) naa_create, ms: median [min-max] count; ratio naaice-rs/C ref per round")
    hdr = f"{'NAA':<12} {'size':>5} {'client':>9} | {'create, cold (iter 1)':>24} | " \
          f"{'create, warm (iter 2..)':>24} | {'first RPC, warm':>22}"
    header(p, hdr)
    ratio_rows = []
    for naa in NAAS:
        for size in sizes:
            for client in CLIENTS:
                sel = pick(runs, naa=naa, client=client, size=size)
                if not sel:
                    continue
                cold = [r["rows"][0][0] for r in sel if r["rows"]]
                warm = [c for r in sel for c, _ in r["rows"][1:]]
                first = [f for r in sel for _, f in r["rows"][1:]]
                p(f"{NAAS[naa]:<12} {size:>5} {CLIENTS[client]:>9} | {fmt_ms(cold):>24} | "
                  f"{fmt_ms(warm):>24} | {fmt_ms(first):>22}")
            # per-round ratios where both clients completed all iterations
            rc, rw, rf = [], [], []
            for rnd in sorted({r["round"] for r in runs}):
                a = by.get((rnd, size, naa, "rs"))
                b = by.get((rnd, size, naa, "ref"))
                if not a or not b or len(a["rows"]) < 2 or len(b["rows"]) < 2:
                    continue
                rc.append(a["rows"][0][0] / b["rows"][0][0])
                rw.append(statistics.median(c for c, _ in a["rows"][1:])
                          / statistics.median(c for c, _ in b["rows"][1:]))
                rf.append(statistics.median(f for _, f in a["rows"][1:])
                          / statistics.median(f for _, f in b["rows"][1:]))
            ratio_rows.append((naa, size, rc, rw, rf))
    p("")
    hdr = f"{'NAA':<12} {'size':>5} | {'rs/ref create cold':>20} | {'rs/ref create warm':>20} | " \
          f"{'rs/ref first warm':>20}"
    header(p, hdr)
    for naa, size, rc, rw, rf in ratio_rows:
        p(f"{NAAS[naa]:<12} {size:>5} | {fmt_ratio(rc):>20} | {fmt_ratio(rw):>20} | "
          f"{fmt_ratio(rf):>20}")
    p("")

    p("(a') the first naa_create of a client process counted from its exec (the libraries'")
    p("     loading included), ms; ratio naaice-rs/C ref per round")
    hdr = f"{'NAA':<12} {'size':>5} | {'naaice-rs':>22} | {'C ref':>22} | {'rs/ref':>20}"
    header(p, hdr)
    for naa in NAAS:
        for size in sizes:
            col = {c: [r["exec_create"] for r in pick(runs, naa=naa, client=c, size=size)
                       if r["exec_create"]] for c in CLIENTS}
            ratios = []
            for rnd in sorted({r["round"] for r in runs}):
                a = by.get((rnd, size, naa, "rs"))
                b = by.get((rnd, size, naa, "ref"))
                if a and b and a["exec_create"] and b["exec_create"]:
                    ratios.append(a["exec_create"] / b["exec_create"])
            if col["rs"] or col["ref"]:
                p(f"{NAAS[naa]:<12} {size:>5} | {fmt_ms(col['rs']):>22} | "
                  f"{fmt_ms(col['ref']):>22} | {fmt_ratio(ratios):>20}")
    p("")

    p("(b) first RPC on a freshly started NAA (first client's iteration 1), ms; ratio")
    p("    naaice-swnaa / C ref NAA per round; 'cold client, used NAA': the same client's")
    p("    iteration 1 when it ran second on that NAA")
    hdr = f"{'client':>9} {'size':>5} {'NAA':<12} | {'fresh NAA: first RPC':>22} | " \
          f"{'fresh NAA: create':>22} | {'cold client, used NAA':>22}"
    header(p, hdr)
    ratio_rows = []
    for client in CLIENTS:
        for size in sizes:
            for naa in NAAS:
                same = pick(runs, naa=naa, client=client, size=size)
                fresh = [r for r in same if r["pos"] == 1 and r["rows"]]
                second = [r for r in same if r["pos"] == 2 and r["rows"]]
                if not fresh and not second:
                    continue
                p(f"{CLIENTS[client]:>9} {size:>5} {NAAS[naa]:<12} | "
                  f"{fmt_ms([r['rows'][0][1] for r in fresh]):>22} | "
                  f"{fmt_ms([r['rows'][0][0] for r in fresh]):>22} | "
                  f"{fmt_ms([r['rows'][0][1] for r in second]):>22}")
            rf, rcr = [], []
            for rnd in sorted({r["round"] for r in runs}):
                a = by.get((rnd, size, "swnaa", client))
                b = by.get((rnd, size, "ref", client))
                if not a or not b or a["pos"] != 1 or b["pos"] != 1 or not a["rows"] or not b["rows"]:
                    continue
                rf.append(a["rows"][0][1] / b["rows"][0][1])
                rcr.append(a["rows"][0][0] / b["rows"][0][0])
            if rf:
                ratio_rows.append((client, size, rf, rcr))
    p("")
    hdr = f"{'client':>9} {'size':>5} | {'swnaa/ref first RPC':>20} | {'swnaa/ref create':>20}"
    header(p, hdr)
    for client, size, rf, rcr in ratio_rows:
        p(f"{CLIENTS[client]:>9} {size:>5} | {fmt_ratio(rf):>20} | {fmt_ratio(rcr):>20}")

    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(os.path.join(out, "report.txt"), "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: compare_report.py OUT")
    sys.exit(main(sys.argv[1]))
