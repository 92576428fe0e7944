"""Leak check: the process's resident memory stays flat over 10 000 RPCs (and over many
handles created and finalized)."""

import numpy as np

import naaice


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def test_rss_flat_over_10000_rpcs():
    p = np.zeros(4096, dtype=np.uint8)
    with naaice.Naa(3, [p], [p], local=True) as naa:
        for _ in range(2000):  # warm-up: allocator pools, caches
            naa.run()
        before = rss_kib()
        for _ in range(10_000):
            st = naa.run()
        after = rss_kib()
    print(f"RSS {before} KiB -> {after} KiB over 10 000 RPCs")
    assert st.ok
    # A leak of even 100 bytes per RPC would show as 1 MB.
    assert after - before < 512, f"RSS grew {after - before} KiB over 10 000 RPCs"


def test_rss_flat_over_handles():
    p = np.zeros(1 << 16, dtype=np.uint8)
    for _ in range(50):
        with naaice.Naa(1, [p], [p], local=True) as naa:
            naa.run()
    before = rss_kib()
    for _ in range(300):
        with naaice.Naa(1, [p], [p], local=True) as naa:
            naa.run()
    after = rss_kib()
    print(f"RSS {before} KiB -> {after} KiB over 300 handles")
    assert after - before < 2048, f"RSS grew {after - before} KiB over 300 handles"
