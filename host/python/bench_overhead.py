"""The Python binding's cost per small RPC, against the Rust API in the same run.

Starts a naaice-swnaa on loopback, then alternates (--rounds times): naaice-bench's steady
state at 64 B against it (the Rust API; its client thread's CPU time per RPC and the median
RPC time, from summary.csv), and a Python loop of ``naa.run()`` on a 64 B in-place NumPy
parameter against the same NAA with the same kernel (3, the empty one): the calling thread's
CPU time per RPC (``time.thread_time``) and the mean RPC time. Prints both and the difference
per round and as medians. Timings scatter on shared machines: read the differences of the
same round.

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


def python_round(address: str, rpcs: int) -> tuple[float, float]:
    """The same RPC from Python: (calling thread CPU µs per RPC, mean RPC µs)."""
    p = np.zeros(64, dtype=np.uint8)
    with naaice.Naa(3, [p], [p], address=address) as naa:
        for _ in range(min(rpcs // 10, 500)):  # warm-up
            naa.run()
        c0, t0 = time.thread_time(), time.perf_counter()
        for _ in range(rpcs):
            naa.run()
        c1, t1 = time.thread_time(), time.perf_counter()
    return (c1 - c0) / rpcs * 1e6, (t1 - t0) / rpcs * 1e6


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
            rust_cpu, rust_t = rust_round(a.bench, address, naa.pid, a.rpcs, out)
            py_cpu, py_t = python_round(address, a.rpcs)
            rows.append((rust_cpu, py_cpu, rust_t, py_t))
            print(f"round {r + 1}: CPU per 64 B RPC: Rust {rust_cpu:.2f} µs, Python "
                  f"{py_cpu:.2f} µs, added {py_cpu - rust_cpu:+.2f} µs; RPC time: Rust "
                  f"{rust_t:.1f} µs (median), Python {py_t:.1f} µs (mean)", flush=True)
    finally:
        naa.terminate()
        naa.wait()
    med = [statistics.median(c) for c in zip(*rows)]
    added = statistics.median(py - rust for rust, py, _, _ in rows)
    print(f"median of {a.rounds} rounds: CPU per RPC Rust {med[0]:.2f} µs, Python {med[1]:.2f}"
          f" µs, added by the binding {added:+.2f} µs (target <= 2 µs); RPC time Rust "
          f"{med[2]:.1f} µs, Python {med[3]:.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
