"""Shared fixtures: a software NAA in this process with Python kernels, and the same kernels
in local mode: tests that take `where` run against both (`naaice.Naa(..., **where)`)."""

import time

import numpy as np
import pytest

import naaice
import naaice.swnaa

# The dtypes the round trips cover; a kernel learns which one from the call's user bytes.
DTYPES = [
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
    np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
]

DOUBLE = 10  # out = 2 * in (bool: not in), in the dtype named by user byte 0
SLEEP = 11  # sleeps user byte 0 tenths of a second, then adds 1 to every byte of param 0
CODE = 12  # returns the 24-bit code in the user bytes
FAIL = 13  # raises
KEEP = 14  # keeps its array after returning
CALL = 15  # writes fn_code, user bytes and rpc number into param 0
ADDR = 16  # writes whether each array is a zero-copy view of its region into param 0

kept = []


def double(params, call):
    dt = np.dtype(DTYPES[call.user_bytes[0]])
    src, dst = params[0].view(dt), params[1].view(dt)
    if dt == np.bool_:
        dst[:] = ~src
    else:
        np.multiply(src, 2, out=dst, casting="unsafe")


def sleep(params, call):
    time.sleep(call.user_bytes[0] / 10)
    params[0][:] += 1


def code(params, call):
    b = call.user_bytes
    return (b[0] << 16) | (b[1] << 8) | b[2]


def fail(params, call):
    raise RuntimeError("this kernel fails on purpose")


def keep(params, call):
    kept.append(params[0])


def call_info(params, call):
    params[0][:5] = [call.fn_code, *call.user_bytes, call.rpc]


def addresses(params, call):
    out = params[-1]
    for i, a in enumerate(params):
        # A zero-copy view: the array (through a memoryview) is over the region object's
        # memory and owns no data.
        out[i] = a.base.obj.address == a.ctypes.data and not a.flags.owndata


KERNELS = {DOUBLE: double, SLEEP: sleep, CODE: code, FAIL: fail, KEEP: keep, CALL: call_info,
           ADDR: addresses}


@pytest.fixture(scope="session")
def server():
    with naaice.swnaa.Server(kernels=KERNELS, max_bytes_per_connection=64 << 20,
                             max_connections=64) as s:
        yield s


@pytest.fixture(scope="session")
def local_kernels():
    """The kernels of `server` as local mode's, for the session."""
    import naaice.local
    for code, kernel in KERNELS.items():
        naaice.local.register_kernel(code, kernel)
    yield
    for code in KERNELS:
        naaice.local.remove_kernel(code)


@pytest.fixture(params=["swnaa", "local"])
def where(request, server):
    """Where a handle connects: the software NAA `server` (over the software transport), or
    local mode's in-process NAA with the same kernels (no sockets)."""
    if request.param == "local":
        request.getfixturevalue("local_kernels")
        return {"local": True}
    return {"address": server.address}
