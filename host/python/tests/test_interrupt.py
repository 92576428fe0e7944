"""Ctrl-C: every blocking call raises KeyboardInterrupt soon after SIGINT, cancels what it
waited for, and leaves the handles usable."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import naaice
from conftest import SLEEP

# The bound from the signal to the exception (generous: the calls look every 50 ms).
BOUND = 0.5
LONG = b"\x1e\x00\x00"  # the SLEEP kernel sleeps 3 s


@pytest.fixture(autouse=True)
def sigint_raises():
    """Python's own SIGINT handler, whatever the runner left: a process started in the
    background by a shell without job control starts with SIGINT ignored, and Python keeps it
    so (no KeyboardInterrupt at all)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def interrupt_after(delay):
    """Sends SIGINT to the main thread after `delay` s; returns a list that gets the time it
    was sent."""
    sent = []

    def fire():
        sent.append(time.monotonic())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    t = threading.Timer(delay, fire)
    t.start()
    return sent, t


def interrupted(call):
    """Runs `call` until SIGINT (sent 0.33 s in) interrupts it; the seconds from the signal to
    the KeyboardInterrupt."""
    sent, timer = interrupt_after(0.33)  # not a multiple of the 50 ms slices
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
        return time.monotonic() - sent[0]
    finally:
        timer.cancel()


def test_wait_and_run(where):
    p = np.zeros(16, dtype=np.uint8)
    with naaice.Naa(SLEEP, [p], [p], **where) as naa:
        naa.invoke(user_bytes=LONG)
        took = interrupted(naa.wait)
        assert took < BOUND, took
        assert naa.state == "DISCONNECTED"  # the RPC was cancelled
        p[:] = 7
        assert naa.run(user_bytes=0).ok and (p == 8).all()  # reconnects
        took = interrupted(lambda: naa.run(user_bytes=LONG))
        assert took < BOUND, took
        p[:] = 1
        assert naa.run(user_bytes=0).ok and (p == 2).all()


def test_wait_any_and_wait_all(where):
    ps = [np.zeros(8, dtype=np.uint8) for _ in range(2)]
    naas = [naaice.Naa(SLEEP, [p], [p], **where) for p in ps]
    try:
        for wait in (naaice.wait_any, naaice.wait_all):
            for naa in naas:
                naa.invoke(user_bytes=LONG)
            took = interrupted(lambda: wait(naas))
            assert took < BOUND, (wait.__name__, took)
            assert not any(naa.busy for naa in naas)  # both cancelled
            for p, naa in zip(ps, naas):
                p[:] = 3
                assert naa.run(user_bytes=0).ok and (p == 4).all()
    finally:
        for naa in naas:
            naa.finalize()


def test_connect_retries(where):
    """Nothing listens: creation retries for up to a minute, Ctrl-C ends it at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = bytearray(8)
    took = interrupted(lambda: naaice.Naa(1, [p], [p], address=f"127.0.0.1:{port}",
                                          connect_timeout=60))
    assert took < BOUND, took
    p.extend(b"x")  # the buffer was released
    with naaice.Naa(1, [p], [p], **where) as naa:
        assert naa.run().ok and p[0] == 1


def test_connect_to_a_silent_peer():
    """A peer that takes TCP connections and never answers: the attempt blocks on a thread of
    its own, Ctrl-C ends the creation at once."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        p = bytearray(8)
        took = interrupted(lambda: naaice.Naa(1, [p], [p], address=f"127.0.0.1:{port}",
                                              connect_timeout=30))
        assert took < BOUND, took
        p.extend(b"x")  # the buffer was released


CHILD = r"""
import signal, sys, time, numpy as np, naaice, naaice.swnaa
# As a terminal's Ctrl-C finds it, even if this test runs where SIGINT is ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)

def slow(params, call):
    time.sleep(call.user_bytes[0] / 10)
    params[0][:] += 1

with naaice.swnaa.Server(kernels={20: slow}) as server:
    p = np.zeros(8, dtype=np.uint8)
    with naaice.Naa(20, [p], [p], address=server.address) as naa:
        naa.invoke(user_bytes=b"\x32\x00\x00")  # 5 s
        print("waiting", flush=True)
        try:
            naa.wait()
            print("not interrupted", flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        p[:] = 5
        st = naa.run(user_bytes=0)
        print("next", st.ok, int(p[0]), flush=True)
"""


def test_sigint_to_a_process():
    """SIGINT to the process (as from a terminal's Ctrl-C), which any of its threads may
    receive, interrupts the main thread's wait."""
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "NAAICE_TRANSPORT": "soft"})
    try:
        assert child.stdout.readline().strip() == "waiting"
        time.sleep(0.3)
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline().strip()
        took = time.monotonic() - sent
        assert line == "interrupted", (line, child.stderr.read())
        assert took < BOUND, took
        assert child.stdout.readline().strip() == "next True 6"
    finally:
        child.kill()
        child.wait()
