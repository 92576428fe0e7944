"""NAA_SPEC, local mode and rank selection: read from the environment by the library's own
code, as in C and Rust (each case in a fresh process: the library reads them once)."""

import os
import subprocess
import sys

import naaice.swnaa

CHILD = r"""
import sys, numpy as np, naaice
p = np.zeros(16, dtype=np.uint8)
try:
    with naaice.Naa(int(sys.argv[1]), [p], [p]) as naa:
        st = naa.run()
        print("entry", naa.entry, "rc", st.return_code, "p", int(p[0]))
except naaice.NaaError as e:
    print(type(e).__name__, e)
"""


def child(fn_code, **env):
    full = {k: v for k, v in os.environ.items()
            if k not in ("NAA_SPEC", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")}
    full.update(env)
    r = subprocess.run([sys.executable, "-c", CHILD, str(fn_code)], env=full,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_local_spec():
    assert child(2, NAA_SPEC="local:2:1") == "entry local:2:1 rc 0 p 2"


def test_spec_and_rank_selection():
    """Two NAAs for one function code: rank 0 gets the first, rank 1 the second."""
    with naaice.swnaa.Server() as a, naaice.swnaa.Server() as b:
        spec = f"{a.address}:1:1,{b.address}:1:1"
        for rank, server in ((0, a), (1, b)):
            out = child(1, NAA_SPEC=spec, OMPI_COMM_WORLD_RANK=str(rank),
                        OMPI_COMM_WORLD_SIZE="2")
            assert out == f"entry {server.address}:1:1 rc 0 p 1", out


def test_selection_errors_name_every_entry():
    assert child(1).startswith("SelectionError NAA selection: NAA_SPEC is not set")
    assert "no free NAA_SPEC entry with function code 5" in child(5, NAA_SPEC="local:1:1")
    out = child(1, NAA_SPEC="127.0.0.1:1:1:1,127.0.0.1:2:1:1", NAAICE_CONNECT_TIMEOUT="1")
    assert out.startswith("SelectionError"), out
    assert "127.0.0.1:1" in out and "127.0.0.1:2" in out, out
    assert "SelectionError" in child(1, NAA_SPEC="nonsense")
