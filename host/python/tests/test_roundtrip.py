"""Round trips of every dtype and size class, zero-copy parameters, per-call arguments."""

import numpy as np
import pytest

import naaice
from conftest import ADDR, CALL, CODE, DOUBLE, DTYPES

SIZES = [1, 63, 64, 4096, 65537, 1 << 20, 8 << 20]  # bytes: tiny, small, page, odd, MiB


def values(dt, n, rng):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        # Halved, so 2 * x stays in range (and wraps identically on both sides anyway).
        return rng.integers(info.min // 2, info.max // 2, n, dtype=dt, endpoint=True)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    return rng.standard_normal(n).astype(dt)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_and_size(where, dtype, size):
    """The kernel reads the input in the dtype and writes 2*x into the output: the bytes
    travel both ways unchanged and in place, for every dtype and size class."""
    rng = np.random.default_rng(size)
    n = max(1, size // np.dtype(dtype).itemsize)
    a = values(dtype, n, rng)
    out = np.zeros_like(a)
    with naaice.Naa(DOUBLE, [a], [out], **where) as naa:
        st = naa.run(user_bytes=bytes([DTYPES.index(dtype), 0, 0]))
    assert st.ok, st
    assert st.bytes_received == out.nbytes
    want = ~a if a.dtype == np.bool_ else (a * 2).astype(a.dtype)
    np.testing.assert_array_equal(out, want)


def test_in_place_is_zero_copy(where):
    """The handle registers the array's own memory (same address), and each RPC reads what
    the program wrote into the array since, without re-registering: nothing is copied."""
    a = np.zeros(4096, dtype=np.uint8)
    with naaice.Naa(1, [a], [a], **where) as naa:
        assert naa.addresses == [a.ctypes.data, a.ctypes.data]
        for value in (0, 5, 100, 254):
            a[:] = value
            assert naa.run().ok
            assert (a == (value + 1) % 256).all()


def test_bytearray_and_memoryview_slices(where):
    """bytearray and a contiguous memoryview slice are parameters too: the results land in
    the bytearray itself, only inside the slice."""
    whole = bytearray(b"\x10" * 100)
    window = memoryview(whole)[10:20]
    b = bytearray(b"\x01" * 33)
    with naaice.Naa(2, [window, b], [window, b], **where) as naa:
        assert naa.run().ok
    assert whole[:10] == b"\x10" * 10 and whole[20:] == b"\x10" * 80
    assert whole[10:20] == b"\x12" * 10
    assert b == b"\x03" * 33


def test_fortran_order_and_2d(where):
    """A 2-D array in Fortran order is one contiguous block: accepted, in place."""
    a = np.asfortranarray(np.arange(12, dtype=np.uint8).reshape(3, 4))
    with naaice.Naa(1, [a], [a], **where) as naa:
        assert naa.run().ok
    np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4) + 1)


def test_per_call_arguments_and_24_bit_code(where):
    """Per-call function code and user bytes reach the kernel; the full 24-bit return code
    comes back."""
    p = np.zeros(8, dtype=np.uint8)
    with naaice.Naa(CALL, [p], [p], **where) as naa:
        assert naa.run(user_bytes=b"\x07\x08\x09").ok
        assert list(p[:5]) == [CALL, 7, 8, 9, 1]
        assert naa.run(user_bytes=0x0A0B0C).ok
        assert list(p[:5]) == [CALL, 10, 11, 12, 2]
        st = naa.run(fn_code=CODE, user_bytes=0xABCDEF)
        assert st.return_code == 0xABCDEF and not st.ok
        st = naa.run(fn_code=CODE, user_bytes=0x000042)
        assert st.return_code == 0x42
        assert naa.run(fn_code=1).ok  # built-in kernel 1 on the same handle
        assert (p[5:] == 1).all()


def test_no_kernel_is_socket_unavail(where):
    """A function code the NAA has no kernel for is answered with return code 1."""
    p = bytearray(16)
    with naaice.Naa(99, [p], [p], **where) as naa:
        st = naa.run()
    assert st.return_code == 1 and "SOCKET_UNAVAIL" in st.return_text


def test_kernel_sees_zero_copy_arrays(where):
    """Inside the kernel, every region array is a view of the NAA's region memory."""
    ins = [np.zeros(64, dtype=np.uint8) for _ in range(3)]
    with naaice.Naa(ADDR, ins, [ins[-1]], **where) as naa:
        assert naa.run().ok
    assert list(ins[-1][:3]) == [1, 1, 1]


def test_test_polls_until_done(where):
    """invoke + test: test returns None until the RPC finished, then its status (again on
    later calls)."""
    p = np.zeros(1 << 16, dtype=np.uint8)
    with naaice.Naa(1, [p], [p], **where) as naa:
        naa.invoke()
        assert naa.busy
        while (st := naa.test()) is None:
            pass
        assert st.ok and not naa.busy
        assert naa.test() == st and naa.wait() == st
    assert (p == 1).all()
