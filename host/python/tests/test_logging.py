"""The library's log records in Python's logging: logger "naaice.<module>", levels mapped,
filtered by NAAICE_LOG (read at import; the default is "warn", as for C programs)."""

import logging
import os
import subprocess
import sys
import time

import pytest

import naaice
import naaice.swnaa


@pytest.mark.skipif(os.environ.get("NAAICE_LOG", "") not in ("", "warn"),
                    reason="NAAICE_LOG filters out the warning")
def test_a_library_warning_reaches_caplog(caplog):
    """A kernel overrunning its deadline: the software NAA's warning is a WARNING record of
    a logger under "naaice", seen by pytest's caplog like any Python record."""

    def slow(params, call):
        time.sleep(0.3)

    with caplog.at_level(logging.WARNING, logger="naaice"):
        with naaice.swnaa.Server(kernels={30: slow}, kernel_timeout=0.05) as server:
            p = bytearray(8)
            with naaice.Naa(30, [p], [p], address=server.address) as naa:
                assert naa.run().return_code == naaice.KERNEL_TIMEOUT
    records = [r for r in caplog.records if "overran its deadline" in r.getMessage()]
    assert records, [r.getMessage() for r in caplog.records]
    assert records[0].levelno == logging.WARNING
    assert records[0].name.startswith("naaice."), records[0].name


CHILD = r"""
import logging, sys, numpy as np, naaice, naaice.swnaa
logging.basicConfig(level=1, stream=sys.stdout, format="%(levelno)s|%(name)s|%(message)s")
with naaice.swnaa.Server() as s:
    p = np.zeros(8, np.uint8)
    with naaice.Naa(1, [p], [p], address=s.address) as naa:
        naa.invoke()
        naa.cancel()
        assert naa.run().ok
"""


def records(naaice_log):
    """The naaice records of a child process (a connection, a cancel, a reconnect) under
    NAAICE_LOG=`naaice_log` (None: unset), as (level, logger, message)."""
    env = {k: v for k, v in os.environ.items() if k != "NAAICE_LOG"}
    env["NAAICE_TRANSPORT"] = "soft"
    if naaice_log is not None:
        env["NAAICE_LOG"] = naaice_log
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    out = [line.split("|", 2) for line in r.stdout.splitlines()]
    return [(int(level), name, msg) for level, name, msg in out if name.startswith("naaice")]


def test_naaice_log_trace_and_debug():
    trace = records("trace")
    # A connection log line at trace level (5), from the server's soft transport.
    assert any(level == 5 and name == "naaice.transport.soft.listener"
               and "TCP connection" in msg for level, name, msg in trace), trace
    # The reconnect after the cancel, at DEBUG, from the handle's module.
    assert any(level == logging.DEBUG and name.startswith("naaice.client.naa")
               and "handle reconnected" in msg for level, name, msg in trace), trace
    debug = records("debug")
    assert any("handle reconnected" in msg for _, _, msg in debug), debug
    assert all(level >= logging.DEBUG for level, _, _ in debug), debug


def test_naaice_log_filters():
    # Unset: warnings and errors only, as for C programs.
    assert all(level >= logging.WARNING for level, _, _ in records(None))
    # A tracing filter with targets: debug from the client modules only.
    only = records("warn,naaice::client=debug")
    assert any("handle reconnected" in msg for _, _, msg in only), only
    assert all(level >= logging.WARNING or name.startswith("naaice.client")
               for level, name, _ in only), only
