"""Python kernels: local mode (naaice.local) and a software NAA server (naaice.swnaa)."""

import os
import subprocess
import sys
import threading
import time

import numpy as np

import naaice
import naaice.local
import naaice.swnaa
from conftest import KEEP


def test_local_kernel_in_place_float64():
    @naaice.local.kernel(40)
    def axpy(params, call):
        x, y = params[0].view(np.float64), params[1].view(np.float64)
        y += 2.5 * x

    x = np.arange(1000, dtype=np.float64)
    y = np.ones(1000)
    with naaice.Naa(40, [x, y], [y], local=True) as naa:
        assert naa.entry is None
        for _ in range(3):
            assert naa.run().ok
    np.testing.assert_allclose(y, 1 + 3 * 2.5 * x)
    assert naaice.local.remove_kernel(40)
    with naaice.Naa(40, [x, y], [y], local=True) as naa:
        assert naa.run().return_code == 1  # removed: SOCKET_UNAVAIL


def test_local_mode_copies_the_programs_arrays():
    """Local mode reaches its NAA without sockets; the kernel works on the NAA's copies of the
    program's arrays (so that a cancel or a timeout hands them back at once), in place too."""
    seen = {}

    @naaice.local.kernel(41)
    def look(params, call):
        seen["in_place"] = params[0].ctypes.data
        seen["input"] = params[1].ctypes.data
        params[0][:] += 1

    x = np.zeros(4096, dtype=np.uint8)
    y = np.arange(256, dtype=np.uint8)
    try:
        with naaice.Naa(41, [x, y], [x], local=True) as naa:
            for _ in range(2):
                assert naa.run().ok
        assert seen["in_place"] != x.ctypes.data
        assert seen["input"] != y.ctypes.data
        assert (x == 2).all()
    finally:
        naaice.local.remove_kernel(41)


def test_python_kernels_on_many_worker_threads_one_after_another():
    """Each local handle has a worker thread of its own, which keeps a Python thread state
    while it runs kernels and gives it back when the handle goes: 40 handles in turn, two
    RPCs each, and a handle whose worker ran no kernel."""
    @naaice.local.kernel(42)
    def add3(params, call):
        params[0][:] += 3

    try:
        x = np.zeros(32, dtype=np.uint8)
        for _ in range(40):
            with naaice.Naa(42, [x], [x], local=True) as naa:
                assert naa.run().ok
                assert naa.run().ok
        assert (x == 240).all()
        with naaice.Naa(3, [x], [x], local=True) as naa:
            assert naa.run().ok
    finally:
        naaice.local.remove_kernel(42)


def test_local_mode_in_a_forked_child():
    """A child of fork() does not inherit the in-process NAA's threads: its local handles
    start a new NAA (with the kernels registered before the fork) instead of waiting for
    the parent's, and the parent's goes on."""
    import os

    @naaice.local.kernel(43)
    def add5(params, call):
        params[0][:] += 5

    try:
        x = np.zeros(16, dtype=np.uint8)
        with naaice.Naa(43, [x], [x], local=True) as naa:
            assert naa.run().ok
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                y = np.zeros(16, dtype=np.uint8)
                with naaice.Naa(43, [y], [y], local=True, connect_timeout=5.0) as naa:
                    code = 0 if naa.run().ok and (y == 5).all() else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        with naaice.Naa(43, [x], [x], local=True) as naa:
            assert naa.run().ok
        assert (x == 10).all()
    finally:
        naaice.local.remove_kernel(43)


def test_kernel_keeping_an_array_fails_the_rpc(server):
    """A kernel that keeps a region array after returning gets KERNEL_FAILED, and the kept
    array cannot be used to take new views."""
    p = bytearray(8)
    with naaice.Naa(KEEP, [p], [p], address=server.address) as naa:
        assert naa.run().return_code == 3
    from conftest import kept
    arr = kept.pop()
    assert arr.base.obj.address == arr.ctypes.data  # the memory itself stays allocated
    try:
        memoryview(arr.base.obj)
    except BufferError:
        pass
    else:
        raise AssertionError("a region view outlived its kernel")


def test_wait_releases_the_gil():
    """A Python kernel can only run while the client waits if wait() released the
    interpreter lock; meanwhile another Python thread keeps counting."""
    counted = []
    running = threading.Event()

    def slow(params, call):
        running.set()
        time.sleep(0.3)
        params[0][:] = 7

    stop = False

    def count():
        n = 0
        while not stop:
            n += 1
            time.sleep(0.001)
        counted.append(n)

    with naaice.swnaa.Server(kernels={41: slow}) as s:
        t = threading.Thread(target=count)
        t.start()
        p = bytearray(4)
        with naaice.Naa(41, [p], [p], address=s.address) as naa:
            st = naa.run()
        stop = True
        t.join()
    assert st.ok and p == b"\x07" * 4 and running.is_set() and counted[0] > 0


def test_server_without_builtins_and_stop():
    with naaice.swnaa.Server(builtins=False) as s:
        assert s.running and s.port > 0 and s.address.endswith(f":{s.port}")
        p = bytearray(4)
        with naaice.Naa(1, [p], [p], address=s.address) as naa:
            assert naa.run().return_code == 1
    assert not s.running


EXIT_CHILD = r"""
import threading, time, numpy as np, naaice, naaice.local

started = threading.Event()

@naaice.local.kernel(44)
def slow(params, call):
    print("kernel started", flush=True)
    started.set()
    time.sleep(0.5)
    params[0][:] += 1
    print("kernel returned", flush=True)

p = np.zeros(8, dtype=np.uint8)
naa = naaice.Naa(44, [p], [p], local=True)
naa.invoke()
assert started.wait(30)
print("exiting", flush=True)
"""


def test_the_interpreter_exits_while_a_python_kernel_runs():
    """A program that ends while its Python kernel runs on a library thread: the exit waits
    for the kernel to return, as for a thread of `threading` (the kernel used to take the
    interpreter lock during finalization, which crashed the process in 2 runs of 3)."""
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", EXIT_CHILD], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "NAAICE_TRANSPORT": "soft"})
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        assert r.stdout.splitlines() == ["kernel started", "exiting", "kernel returned"], (
            r.stdout, r.stderr)
