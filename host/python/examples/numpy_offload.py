"""Offload a NumPy computation: y += a * x on float64 vectors, in place.

The kernel is written in Python too (local mode, or a software NAA started here), so this
runs anywhere; against an FPGA NAA only NAA_SPEC changes.

    python numpy_offload.py              # local mode: the kernel runs in this process
    python numpy_offload.py --server     # a software NAA on loopback, reached over TCP
"""

import sys

import numpy as np

import naaice
import naaice.local
import naaice.swnaa

AXPY = 20  # our function code


def axpy(params, call):
    """The kernel: params are uint8 arrays over the NAA's memory; view them as float64."""
    a = params[0].view(np.float64)[0]
    x = params[1].view(np.float64)
    y = params[2].view(np.float64)
    y += a * x  # in place: y is an output, written back to the client


def main() -> int:
    n = 1 << 20
    a = np.array([2.0])
    x = np.linspace(0.0, 1.0, n)
    y = np.ones(n)
    expected = y + 3 * a[0] * x  # three RPCs below

    server = None
    if "--server" in sys.argv:
        server = naaice.swnaa.Server(kernels={AXPY: axpy})
        where = {"address": server.address}
    else:
        naaice.local.register_kernel(AXPY, axpy)
        where = {"local": True}

    # Inputs a, x, y; y is also the output (in place). Registered once, no copies.
    with naaice.Naa(AXPY, [a, x, y], [y], **where) as naa:
        for _ in range(3):
            naa.invoke()  # returns at once: overlap work here
            status = naa.wait()
            if not status.ok:
                print(f"numpy_offload: {status}", file=sys.stderr)
                return 1
        s = naa.stats
        print(
            f"numpy_offload: stats: {s.rpcs} RPCs, {s.errors.total} errors, "
            f"{s.bytes_sent} B sent, {s.bytes_received} B received, "
            f"connect {s.connect_time * 1e6:.0f} us, MRSP {s.mrsp_time * 1e6:.0f} us, "
            f"latency p50 {s.latency_p50 * 1e6:.1f} us, p99 {s.latency_p99 * 1e6:.1f} us"
        )
    if server:
        server.stop()
    wrong = int(np.count_nonzero(~np.isclose(y, expected)))
    print(f"numpy_offload: {n} float64 values, 3 RPCs, {wrong} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
