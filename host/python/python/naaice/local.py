"""Local (lookaside) mode: kernels that run inside this process, written in Python.

``NAA_SPEC=local:FN_CODE:PARAM_COUNT`` (or ``naaice.Naa(..., local=True)``) connects a handle
to an in-process NAA with the built-in kernels (1 adds 1 to every byte, 2 adds 2, 3 does
nothing) and those registered here. The program itself does not change between local mode,
a software NAA and an FPGA NAA: only ``NAA_SPEC`` differs.

A kernel is ``kernel(params, call)``: ``params`` is a list of ``numpy.uint8`` arrays over the
NAA's copies of the parameters, in the client's order (zero-copy: write the results into the
output arrays in place; ``params[0].view(numpy.float64)`` reinterprets); ``call`` has
``fn_code``, ``user_bytes`` and ``rpc``. It returns ``None`` or ``0`` (success) or a return
code up to ``2**24 - 1`` (``0x10`` and up for the application's own); an exception answers
the RPC with KERNEL_FAILED (3) and prints the traceback. The arrays are valid only while the
kernel runs: keeping one after returning also answers KERNEL_FAILED (copy instead).
"""

from __future__ import annotations

from typing import Callable

import numpy as _np

from . import _native

Kernel = Callable[[list, "_native.KernelCall"], "int | None"]


def _adapt(kernel: Kernel):
    """The native calling convention (``Region`` objects) to NumPy arrays."""

    def run(regions, call):
        return kernel([_np.frombuffer(r, dtype=_np.uint8) for r in regions], call)

    run.__qualname__ = getattr(kernel, "__qualname__", "kernel")
    return run


def register_kernel(fn_code: int, kernel: Kernel) -> None:
    """Registers (or replaces) the local kernel for ``fn_code`` (1-127). Handles created
    afterwards use it; kernels run on library threads (holding the interpreter lock while
    they run)."""
    _native.register_local_kernel(fn_code, _adapt(kernel))


def remove_kernel(fn_code: int) -> bool:
    """Removes the local kernel for ``fn_code`` (built-ins too): handles created afterwards
    get return code 1 (SOCKET_UNAVAIL) for it. True if there was one."""
    return _native.remove_local_kernel(fn_code)


def kernel(fn_code: int):
    """Decorator form of :func:`register_kernel`: ``@naaice.local.kernel(10)``."""

    def register(f: Kernel) -> Kernel:
        register_kernel(fn_code, f)
        return f

    return register
