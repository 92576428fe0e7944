"""The Python binding's cost per small RPC, against the Rust API in the same run.

Starts a naaice-swnaa on loopback, then alternates (--rounds times), all against it with the
same kernel (3, the empty one) and 64 B:

* naaice-bench's steady state (the Rust API; its client thread's CPU time per RPC and the
  median RPC time, from summary.csv; it also times raw round trips between the RPCs and reads
  the CPU clocks around each RPC);
* a Rust loop of invoke + wait on a handle made from Python (``Naa._run_many``): the Rust API's
  cost on exactly the handle and connection the Python loop uses;
* a Python loop of ``naa.run()`` on the same handle (a 64 B in-place NumPy parameter).

The two loops alternate in blocks of 500 RPCs. CPU times are the calling thread's
(``time.thread_time``), medians over the blocks; RPC times are means. What the binding adds is
the median over block pairs of the Python block's CPU time minus the Rust block's. Timings
scatter on shared machines: compare within a round, and the medians.

    python bench_overhead.py --bench target/release/naaice-bench \
        --swnaa target/release/naaice-swnaa [--rounds 3] [--rpcs 20000]
"""

import argparse
import csv
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import naaice


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"naaice-swnaa exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("naaice-swnaa did not start listening")


def rust_round(bench: str, address: str, pid: int, steady: int, out: str) -> tuple[float, float]:
    """naaice-bench's steady 64 B RPC: (client thread CPU µs per RPC, median RPC µs)."""
    subprocess.run(
        [bench, "--naa", address, "--naa-pid", str(pid), "--fncode", "3", "--max-size", "64",
         "--steady", str(steady), "--reps", "2", "--no-plots", "--out", out],
        check=True, stdout=subprocess.DEVNULL,
    )
    with open(os.path.join(out, "summary.csv")) as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    row = next(r for r in rows if r["byte_length"] == "64")
    return float(row["steady_cpu_client_us"]), float(row["steady_rpc_us"])


def loops_round(address: str, rpcs: int, block: int = 500) -> tuple[float, float, float, float, float]:
    """The Rust loop and the Python loop on one handle, alternating in blocks of ``block``
    RPCs (so that load changes hit both alike): (Rust CPU µs per RPC, Python CPU µs per RPC,
    median over block pairs of Python minus Rust CPU µs, Rust mean RPC µs, Python mean
    RPC µs); CPU times are medians over the blocks."""
    p = np.zeros(64, dtype=np.uint8)
    with naaice.Naa(3, [p], [p], address=address) as naa:
        for _ in range(min(rpcs // 10, 500)):  # warm-up
            naa.run()

        def timed(loop) -> tuple[float, float]:
            c0, t0 = time.thread_time(), time.perf_counter()
            loop()
            c1, t1 = time.thread_time(), time.perf_counter()
            return (c1 - c0) / block * 1e6, (t1 - t0) / block * 1e6

        def python_loop() -> None:
            for _ in range(block):
                naa.run()

        def rust_loop() -> None:
            naa._run_many(block)

        rust, py = [], []
        for i in range(max(1, rpcs // block)):
            if i % 2 == 0:
                rust.append(timed(rust_loop))
                py.append(timed(python_loop))
            else:
                py.append(timed(python_loop))
                rust.append(timed(rust_loop))
        # One call into the binding that does no I/O: test() of a finished RPC.
        n = 100_000
        c0 = time.thread_time()
        for _ in range(n):
            naa.test()
        call_us = (time.thread_time() - c0) / n * 1e6
    diff = statistics.median(q[0] - r[0] for r, q in zip(rust, py))
    print(f"  a call without I/O (naa.test() of a finished RPC): {call_us:.2f} µs CPU")
    return (statistics.median(r[0] for r in rust), statistics.median(q[0] for q in py), diff,
            statistics.mean(r[1] for r in rust), statistics.mean(q[1] for q in py))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="the naaice-bench binary")
    ap.add_argument("--swnaa", required=True, help="the naaice-swnaa binary")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rpcs", type=int, default=20000, help="RPCs per round, both sides")
    ap.add_argument("--out", default=None, help="folder for naaice-bench's output")
    a = ap.parse_args()
    os.environ["NAAICE_TRANSPORT"] = "soft"
    out = a.out or tempfile.mkdtemp(prefix="naaice-overhead.")
    port = free_port()
    address = f"127.0.0.1:{port}"
    naa = subprocess.Popen([a.swnaa, "--address", "127.0.0.1", "--port", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, naa)
        rows = []
        for r in range(a.rounds):
            bench_cpu, bench_t = rust_round(a.bench, address, naa.pid, a.rpcs, out)
            rust_cpu, py_cpu, diff, rust_t, py_t = loops_round(address, a.rpcs)
            rows.append((bench_cpu, rust_cpu, py_cpu, bench_t, rust_t, py_t, diff))
            print(f"round {r + 1}: CPU per 64 B RPC: naaice-bench {bench_cpu:.2f} µs, Rust loop "
                  f"{rust_cpu:.2f} µs, Python loop {py_cpu:.2f} µs, added {diff:+.2f} µs; RPC "
                  f"time: naaice-bench {bench_t:.1f} µs (median), Rust loop {rust_t:.1f} µs, "
                  f"Python loop {py_t:.1f} µs", flush=True)
    finally:
        naa.terminate()
        naa.wait()
    med = [statistics.median(c) for c in zip(*rows)]
    added = statistics.median(row[6] for row in rows)
    print(f"median of {a.rounds} rounds: CPU per 64 B RPC naaice-bench {med[0]:.2f} µs, Rust loop"
          f" {med[1]:.2f} µs, Python loop {med[2]:.2f} µs; added by the binding {added:+.2f} µs"
          f" (target <= 2 µs); RPC time naaice-bench {med[3]:.1f} µs, Rust loop {med[4]:.1f} µs,"
          f" Python loop {med[5]:.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
