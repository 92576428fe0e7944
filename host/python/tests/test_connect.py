"""One connect story: an NAA named by address= or by NAA_SPEC is tried until the connect
timeout passes; nothing reachable is a TransportUnavailableError either way."""

import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np

import naaice
import naaice.swnaa


def dead_port():
    """A port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_address_retries_until_the_connect_timeout():
    port = dead_port()
    start = time.monotonic()
    try:
        naaice.Naa(1, [bytearray(8)], [], address=f"127.0.0.1:{port}", connect_timeout=1.0)
    except naaice.TransportUnavailableError as e:
        took = time.monotonic() - start
        assert type(e) is naaice.TransportUnavailableError
        assert f"127.0.0.1:{port}" in str(e) and "attempts" in str(e), e
    else:
        raise AssertionError("connected to a port nobody listens on")
    assert 0.9 <= took < 4, took  # it kept trying for the timeout, then gave up


CHILD = r"""
import sys, time, naaice
start = time.monotonic()
try:
    naaice.Naa(1, [bytearray(8)], [], connect_timeout=float(sys.argv[1]))
except naaice.NaaError as e:
    print(type(e).__name__, isinstance(e, naaice.TransportUnavailableError),
          round(time.monotonic() - start, 2))
    print(e)
"""


def test_naa_spec_retries_and_raises_the_same_type():
    port = dead_port()
    env = {k: v for k, v in os.environ.items() if k not in ("NAA_SPEC", "NAAICE_CONNECT_TIMEOUT")}
    env["NAA_SPEC"] = f"127.0.0.1:{port}:1:1"
    r = subprocess.run([sys.executable, "-c", CHILD, "1.0"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    first, message = r.stdout.splitlines()[:2]
    name, unavailable, took = first.split()
    assert name == "SelectionError" and unavailable == "True", r.stdout
    assert 0.9 <= float(took) < 4, took
    assert f"127.0.0.1:{port}" in message, message


def test_an_naa_that_starts_late_is_reached():
    """The NAA starts listening 0.4 s after the handle began trying: the handle connects."""
    port = dead_port()
    servers = []
    timer = threading.Timer(0.4, lambda: servers.append(naaice.swnaa.Server(port=port)))
    timer.start()
    try:
        p = np.zeros(8, dtype=np.uint8)
        with naaice.Naa(1, [p], [p], address=f"127.0.0.1:{port}", connect_timeout=20) as naa:
            assert naa.run().ok and (p == 1).all()
    finally:
        timer.join()
        for s in servers:
            s.stop()


def test_server_takes_many_connections():
    """The default connection limit fits development: more clients than this machine has
    cores (a 2-core laptop refused the third before)."""
    n = max(8, 2 * (os.cpu_count() or 1))
    with naaice.swnaa.Server() as server:
        ps = [np.zeros(8, dtype=np.uint8) for _ in range(n)]
        naas = [naaice.Naa(1, [p], [p], address=server.address) for p in ps]
        try:
            assert all(naa.run().ok for naa in naas)
            assert all((p == 1).all() for p in ps)
        finally:
            for naa in naas:
                naa.finalize()
    assert naaice.swnaa.DEFAULT_MAX_CONNECTIONS == 64
