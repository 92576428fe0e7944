"""Type stubs of the native module (the classes are re-exported by ``naaice``)."""

import builtins
from typing import Any
from collections.abc import Buffer, Callable, Sequence

NAA_SUCCESS: int
SOCKET_UNAVAIL: int
KERNEL_TIMEOUT: int
KERNEL_FAILED: int

class NaaError(Exception): ...
class TransportError(NaaError): ...
class TransportUnavailableError(TransportError): ...
class ProtocolError(NaaError): ...

class MrspError(ProtocolError):
    code: int
    """The NAA's MRSP error code (1 not enough memory, 2 invalid address, ...)."""

class SelectionError(TransportUnavailableError): ...
class BusyError(NaaError): ...
class StateError(NaaError): ...
class ClosedError(NaaError): ...
class CancelledError(NaaError): ...
class NaaTimeoutError(NaaError, TimeoutError): ...
class InvalidArgumentError(NaaError, ValueError): ...
class BufferError(NaaError, builtins.BufferError): ...

class Status:
    """The outcome of an RPC (``naa_status``)."""

    @property
    def return_code(self) -> int:
        """The NAA's 24-bit return code: 0 success, 1 no kernel (SOCKET_UNAVAIL), 2 kernel
        timeout, 3 kernel failed, 0x10 and up the kernel's own."""
    @property
    def state(self) -> str:
        """The connection's phase after the RPC, e.g. ``"FINISHED"``."""
    @property
    def bytes_received(self) -> int:
        """Length of the NAA's final write."""
    @property
    def ok(self) -> bool:
        """True if the return code is 0."""
    @property
    def return_text(self) -> str:
        """The return code in words."""

UserBytes = bytes | bytearray | int

class Naa:
    """A connection to an NAA prepared for one function (``naa_handle``)."""

    def __init__(
        self,
        fn_code: int,
        inputs: Sequence[Buffer] | Buffer,
        outputs: Sequence[Buffer] | Buffer | None = None,
        *,
        address: str | None = None,
        local: bool = False,
        rank: int | None = None,
        connect_timeout: float | None = None,
        rpc_timeout: float | None = None,
        mrsp_timeout: float | None = None,
        single_send: Sequence[int] | None = None,
    ) -> None: ...
    def invoke(
        self,
        *,
        fn_code: int | None = None,
        user_bytes: UserBytes | None = None,
        timeout: float | None = None,
    ) -> None:
        """Starts one RPC and returns at once (``naa_invoke``)."""
    def test(self) -> Status | None:
        """Progresses without blocking (``naa_test``): the status once finished, else None."""
    def wait(self) -> Status:
        """Blocks until the RPC finished (``naa_wait``), interpreter lock released."""
    def run(
        self,
        *,
        fn_code: int | None = None,
        user_bytes: UserBytes | None = None,
        timeout: float | None = None,
    ) -> Status:
        """invoke + wait."""
    def cancel(self) -> bool:
        """Abandons the RPC in flight; the next invoke reconnects."""
    def finalize(self) -> None:
        """Disconnects and releases the parameters (``naa_finalize``)."""
    @property
    def fn_code(self) -> int: ...
    @property
    def busy(self) -> bool: ...
    @property
    def state(self) -> str: ...
    @property
    def entry(self) -> str | None:
        """The ``NAA_SPEC`` entry in use, or None (created with an address)."""
    @property
    def addresses(self) -> list[int]:
        """The registered address of each parameter (inputs, then outputs)."""
    def _stats(self) -> dict[str, Any]:
        """The handle's statistics as a dict (``Naa.stats`` is the dataclass)."""
    def _run_many(self, n: int) -> Status | None:
        """n RPCs in a Rust loop (for measuring the binding's overhead)."""
    def __enter__(self) -> Naa: ...
    def __exit__(self, *exc: object) -> bool: ...

class Region:
    """A kernel's region (buffer protocol; ``numpy.frombuffer(region, numpy.uint8)``)."""

    @property
    def address(self) -> int: ...
    @property
    def flags(self) -> int: ...
    def __len__(self) -> int: ...

class KernelCall:
    """What a kernel is called with besides its regions."""

    @property
    def fn_code(self) -> int: ...
    @property
    def user_bytes(self) -> list[int]: ...
    @property
    def rpc(self) -> int: ...

class _Await:
    def poll(self, wake: Callable[[], None]) -> Status | None: ...
    def abandon(self) -> None: ...

_KernelEntry = tuple[
    int, Callable[[list[Region], KernelCall], int | None], str | None, float | None
]

class _Server:
    def __init__(
        self,
        host: str,
        port: int,
        kernels: list[_KernelEntry],
        builtins: bool,
        kernel_timeout: float | None = None,
        max_connections: int | None = None,
        max_bytes_per_connection: int | None = None,
        metrics: str | None = None,
    ) -> None: ...
    address: str
    port: int
    metrics_address: str | None
    running: bool
    kernels: list[tuple[int, str]]
    def set_kernels(self, kernels: list[_KernelEntry], builtins: bool) -> None: ...
    def stop(self) -> None: ...

class _Pipeline:
    def __init__(
        self, fn_code: int, chunk: int, depth: int, address: str | None = None,
        local: bool = False,
    ) -> None: ...
    depth: int
    chunk: int
    def run(self, data: Any) -> tuple[int, int, int | None, int]: ...
    def close(self) -> None: ...

def _wait_async(naa: Naa) -> _Await: ...
def _process_stats() -> dict[str, Any]: ...
def wait_any(handles: Sequence[Naa]) -> tuple[int, Status] | None:
    """Blocks until one in-flight handle's RPC finished: ``(index, status)``; None if none is
    in flight. A failed RPC raises its error with ``.index`` set."""
def test_any(handles: Sequence[Naa]) -> tuple[int, Status] | None: ...
def wait_all(handles: Sequence[Naa]) -> list[Status | NaaError | None]: ...
def register_local_kernel(fn_code: int, func: Callable[[list[Region], KernelCall], int | None]) -> None: ...
def remove_local_kernel(fn_code: int) -> bool: ...

__version__: str
