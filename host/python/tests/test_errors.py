"""Errors: bad buffers, bad arguments, and each library error kind as its exception."""

import builtins
import socket

import numpy as np
import pytest

import naaice
from conftest import FAIL, SLEEP


def test_hierarchy():
    """Every error is a NaaError; three are also the matching built-in exceptions."""
    for cls in (naaice.TransportError, naaice.TransportUnavailableError, naaice.ProtocolError,
                naaice.MrspError, naaice.SelectionError, naaice.BusyError, naaice.StateError,
                naaice.ClosedError, naaice.CancelledError, naaice.NaaTimeoutError,
                naaice.InvalidArgumentError, naaice.BufferError):
        assert issubclass(cls, naaice.NaaError)
    assert issubclass(naaice.TransportUnavailableError, naaice.TransportError)
    # "Nothing reachable" is one type, whether the NAA was named by address or NAA_SPEC.
    assert issubclass(naaice.SelectionError, naaice.TransportUnavailableError)
    assert issubclass(naaice.MrspError, naaice.ProtocolError)
    assert issubclass(naaice.NaaTimeoutError, TimeoutError)
    assert issubclass(naaice.InvalidArgumentError, ValueError)
    assert issubclass(naaice.BufferError, builtins.BufferError)


def test_read_only_buffers(where):
    ro = np.zeros(16, dtype=np.uint8)
    ro.flags.writeable = False
    for obj, name in ((b"abcd", "bytes"), (ro, "ndarray"), (memoryview(b"x"), "memoryview")):
        with pytest.raises(naaice.BufferError, match=f"input 0 \\({name}\\) is read-only"):
            naaice.Naa(1, [obj], [], **where)


def test_non_contiguous_buffers(where):
    a = np.zeros(64, dtype=np.uint8)
    with pytest.raises(naaice.BufferError, match="output 0 .* is not contiguous"):
        naaice.Naa(1, [a[:32]], [a[::2]], **where)
    b = np.zeros((8, 8))
    with pytest.raises(naaice.BufferError, match="not contiguous"):
        naaice.Naa(1, [b[:, :3]], [], **where)


def test_not_a_buffer_empty_and_overlap(where):
    with pytest.raises(naaice.BufferError, match="does not export a buffer"):
        naaice.Naa(1, ["text"], [], **where)
    with pytest.raises(naaice.InvalidArgumentError, match="empty"):
        naaice.Naa(1, [bytearray()], [], **where)
    a = np.zeros(64, dtype=np.uint8)
    with pytest.raises(naaice.InvalidArgumentError, match="overlaps"):
        naaice.Naa(1, [a[:40], a[20:]], [], **where)


def test_held_buffers_cannot_be_resized(where):
    """While the handle holds them, Python refuses to resize the parameter objects (their
    memory must stay where it was registered); after finalize it may."""
    b = bytearray(64)
    a = np.zeros(64, dtype=np.uint8)
    naa = naaice.Naa(1, [b, a], [b, a], **where)
    with pytest.raises(builtins.BufferError):
        b.extend(b"more")
    with pytest.raises(ValueError):
        a.resize(128)
    naa.finalize()
    b.extend(b"more")
    a.resize(128, refcheck=False)
    assert len(b) == 68 and a.size == 128


def test_bad_arguments(where):
    p = bytearray(8)
    for code in (0, 128, 1000):
        with pytest.raises(naaice.InvalidArgumentError, match="function code"):
            naaice.Naa(code, [p], [p], **where)
    with naaice.Naa(1, [p], [p], **where) as naa:
        with pytest.raises(naaice.InvalidArgumentError, match="user_bytes"):
            naa.invoke(user_bytes=b"toolong")
        with pytest.raises(naaice.InvalidArgumentError, match="user_bytes"):
            naa.invoke(user_bytes=1 << 24)
        with pytest.raises(naaice.InvalidArgumentError, match="function code"):
            naa.invoke(fn_code=0)
        with pytest.raises(naaice.InvalidArgumentError, match="timeout"):
            naa.invoke(timeout=-1)
        with pytest.raises(naaice.StateError, match="no RPC"):
            naa.wait()
    with pytest.raises(naaice.InvalidArgumentError, match="address"):
        naaice.Naa(1, [p], [p], address="no-port")
    with pytest.raises(naaice.InvalidArgumentError, match="single_send"):
        naaice.Naa(1, [p], [p], **where, single_send=[3])


def test_unreachable_naa_is_transport_unavailable(monkeypatch):
    """Nothing listens at the address: TransportUnavailableError once the connect timeout
    passed, whichever transport, saying what the last attempt found."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setenv("NAAICE_TRANSPORT", "auto")
    with pytest.raises(naaice.TransportUnavailableError, match="NAA not reached"):
        naaice.Naa(1, [bytearray(8)], [], address=f"127.0.0.1:{port}", connect_timeout=0.5)
    monkeypatch.setenv("NAAICE_TRANSPORT", "soft")
    with pytest.raises(naaice.TransportUnavailableError,
                       match=f"NAA at 127.0.0.1:{port} not reached .*connect failed"):
        naaice.Naa(1, [bytearray(8)], [], address=f"127.0.0.1:{port}", connect_timeout=0.5)
    monkeypatch.setenv("NAAICE_TRANSPORT", "nonsense")
    with pytest.raises(naaice.SelectionError, match="NAAICE_TRANSPORT"):
        naaice.Naa(1, [bytearray(8)], [], address=f"127.0.0.1:{port}")


def test_mrsp_refusal_carries_the_code(server):
    """More memory than the NAA grants one connection: refused in the MRSP, code 0x01."""
    big = np.zeros(65 << 20, dtype=np.uint8)
    with pytest.raises(naaice.MrspError) as e:
        naaice.Naa(1, [big], [big], address=server.address)
    assert e.value.code == 1


def test_rpc_deadline_is_a_timeout(where):
    p = np.zeros(8, dtype=np.uint8)
    with naaice.Naa(SLEEP, [p], [p], **where) as naa:
        with pytest.raises(naaice.NaaTimeoutError):
            naa.run(user_bytes=b"\x14\x00\x00", timeout=0.2)  # kernel sleeps 2 s
        naa.cancel()
        assert naa.run(user_bytes=0).ok  # the handle recovers (reconnects)


def test_kernel_exception_is_kernel_failed(where, capfd):
    p = bytearray(8)
    with naaice.Naa(FAIL, [p], [p], **where) as naa:
        st = naa.run()
    assert st.return_code == 3 == naaice.KERNEL_FAILED
    assert st.return_text.startswith("KERNEL_FAILED"), st.return_text
    assert "this kernel fails on purpose" in capfd.readouterr().err


def test_return_code_names():
    """The return codes by the names C, Fortran and Rust give them."""
    assert (naaice.NAA_SUCCESS, naaice.SOCKET_UNAVAIL, naaice.KERNEL_TIMEOUT,
            naaice.KERNEL_FAILED) == (0, 1, 2, 3)


def test_busy_and_closed(where):
    p = np.zeros(8, dtype=np.uint8)
    naa = naaice.Naa(SLEEP, [p], [p], **where)
    naa.invoke(user_bytes=b"\x02\x00\x00")
    with pytest.raises(naaice.BusyError):
        naa.invoke()
    assert naa.wait().ok
    naa.finalize()
    naa.finalize()  # again: nothing
    with pytest.raises(naaice.ClosedError):
        naa.invoke()
    with pytest.raises(naaice.ClosedError):
        naa.state
