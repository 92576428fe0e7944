"""Offload RPCs to network-attached accelerators (NAAs): the NAAICE middleware API.

A handle connects to an NAA for one function code and registers its parameters once; the
parameters are your own writable buffers (NumPy arrays, ``bytearray``, ``memoryview``), used in
place: the NAA reads the inputs from them and writes the results into them, without copies::

    import numpy as np, naaice
    data = np.zeros(1 << 20, dtype=np.uint8)          # one in-place parameter
    with naaice.Naa(1, [data], [data]) as naa:         # the NAA from NAA_SPEC
        status = naa.run()                             # invoke + wait
    assert status.ok and (data == 1).all()             # built-in kernel 1 adds 1 per byte

``NAA_SPEC`` (``host:port:fn_code:param_count,...``; ``local:FN:N`` for local mode), rank
selection, ``NAAICE_TRANSPORT`` and the timeouts are read by the same code as in C and Rust.
Kernels written in Python: :mod:`naaice.local` (local mode) and :mod:`naaice.swnaa` (a software
NAA server). Errors are subclasses of :class:`NaaError`. Every blocking call (``wait``,
``run``, ``wait_any``, ``wait_all``, creating a handle) is interrupted by Ctrl-C: it cancels
the RPCs it waited for and raises ``KeyboardInterrupt``; the handles stay usable. The
library's log records go to the ``naaice`` logger of :mod:`logging`, filtered by
``NAAICE_LOG`` (default ``warn``). The NAA's return codes: :data:`NAA_SUCCESS`,
:data:`SOCKET_UNAVAIL`, :data:`KERNEL_TIMEOUT`, :data:`KERNEL_FAILED`.
"""

from __future__ import annotations

import asyncio as _asyncio
import logging as _logging

from . import _native
from ._native import (
    KERNEL_FAILED,
    KERNEL_TIMEOUT,
    NAA_SUCCESS,
    SOCKET_UNAVAIL,
    BufferError,
    BusyError,
    CancelledError,
    ClosedError,
    InvalidArgumentError,
    MrspError,
    NaaError,
    NaaTimeoutError,
    ProtocolError,
    SelectionError,
    StateError,
    Status,
    TransportError,
    TransportUnavailableError,
    test_any,
    wait_all,
    wait_any,
)

from .pipeline import Pipeline, PipelineReport
from .stats import Errors, Stats, process_stats

__version__ = _native.__version__

# The library's trace records arrive at level 5 (NAAICE_LOG=trace): give it a name.
if _logging.getLevelName(5) == "Level 5":
    _logging.addLevelName(5, "TRACE")

__all__ = [
    "Naa",
    "Pipeline",
    "PipelineReport",
    "Status",
    "Stats",
    "Errors",
    "process_stats",
    "wait_any",
    "test_any",
    "wait_all",
    "NaaError",
    "TransportError",
    "TransportUnavailableError",
    "ProtocolError",
    "MrspError",
    "NaaTimeoutError",
    "SelectionError",
    "BusyError",
    "StateError",
    "ClosedError",
    "CancelledError",
    "InvalidArgumentError",
    "BufferError",
    "NAA_SUCCESS",
    "SOCKET_UNAVAIL",
    "KERNEL_TIMEOUT",
    "KERNEL_FAILED",
]


class Naa(_native.Naa):
    """A connection to an NAA prepared for one function (``naa_handle``).

    ``Naa(fn_code, inputs, outputs=None, *, address=None, local=False, rank=None,
    connect_timeout=None, rpc_timeout=None, mrsp_timeout=None, single_send=None)``

    * ``inputs``/``outputs``: writable, contiguous buffer objects (or one object); the same
      object in both is one in-place parameter. They are held (and cannot be resized) until
      :meth:`finalize`; do not touch them while an RPC is in flight.
    * the NAA: ``address="host:port"``, ``local=True`` (the in-process NAA of local mode), or
      else the ``NAA_SPEC`` entry for ``fn_code`` chosen by the process's rank (``rank``
      overrides the launcher's), failing over to further entries.
    * timeouts in seconds; defaults from ``NAAICE_CONNECT_TIMEOUT`` / ``NAAICE_RPC_TIMEOUT``.
      While nothing is reachable, creation tries again until ``connect_timeout`` passes, then
      raises :class:`TransportUnavailableError` (:class:`SelectionError`, a subclass, for
      ``NAA_SPEC``).

    Use it as a context manager, or call :meth:`finalize`.
    """

    @property
    def stats(self) -> Stats:
        """This handle's client statistics (:class:`Stats`): RPCs, errors by kind, bytes,
        connect and MRSP time, latency percentiles."""
        return Stats._from_native(self._stats())

    async def call(self, *, fn_code=None, user_bytes=None, timeout=None) -> Status:
        """One RPC as a coroutine: ``status = await naa.call()``.

        Invokes, then waits without blocking the event loop (the library's reactor thread
        wakes the loop when the RPC finished). If the awaiting task is cancelled, the RPC is
        cancelled (:meth:`cancel`: the next invoke reconnects).
        """
        self.invoke(fn_code=fn_code, user_bytes=user_bytes, timeout=timeout)
        return await self.wait_async()

    async def wait_async(self) -> Status:
        """Waits for the RPC in flight (started with :meth:`invoke`) without blocking the
        event loop."""
        loop = _asyncio.get_running_loop()
        op = _native._wait_async(self)
        done = loop.create_future()

        def step() -> None:
            if done.done():
                return
            try:
                status = op.poll(wake)
            except BaseException as e:  # the RPC's error goes to the awaiting task
                done.set_exception(e)
                return
            if status is not None:
                done.set_result(status)

        def wake() -> None:
            loop.call_soon_threadsafe(step)

        step()
        try:
            return await done
        except _asyncio.CancelledError:
            op.abandon()
            self.cancel()
            raise
