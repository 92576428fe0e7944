"""A software NAA served from Python, with kernels written in Python.

::

    def scale(params, call):
        params[0].view(numpy.float64)[:] *= 2.0

    with naaice.swnaa.Server(port=12345, kernels={10: scale}) as server:
        ...   # clients: NAA_SPEC=127.0.0.1:12345:10:1

It is the library's software NAA (the one ``naaice-swnaa`` runs), serving on background
threads; kernels are as in :mod:`naaice.local`. Clients in any language (C, Fortran, Rust,
Python) reach it at ``server.address``.
"""

from __future__ import annotations

from . import _native
from .local import Kernel, _adapt

DEFAULT_MAX_CONNECTIONS = 64
"""Default of :class:`Server`'s ``max_connections`` (``naaice-swnaa`` defaults to the number of
cores instead, a production NAA's choice)."""


class Server:
    """A software NAA listening on ``host:port`` (port 0: a free one, see :attr:`port`).

    ``kernels`` maps function codes (1-127) to kernels; the built-ins (1 adds 1, 2 adds 2, 3
    does nothing) are served too unless ``builtins=False``. ``kernel_timeout`` (seconds)
    answers longer kernels with KERNEL_TIMEOUT. The transport is chosen by
    ``NAAICE_TRANSPORT``. ``max_connections`` bounds the clients served at once (default
    :data:`DEFAULT_MAX_CONNECTIONS`, 64: enough for development and tests on a laptop; one
    thread each; more are refused with "NAA overloaded"). ``max_bytes_per_connection`` bounds
    what one client may register (more is refused in the MRSP: :class:`naaice.MrspError`).
    ``metrics="host:port"`` serves the NAA's Prometheus metrics there (``GET /metrics``; port
    0 picks a free one, see :attr:`metrics_address`); the endpoint is off by default and
    reachable by anyone who reaches that address.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        kernels: dict[int, Kernel] | None = None,
        *,
        builtins: bool = True,
        kernel_timeout: float | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_bytes_per_connection: int | None = None,
        metrics: str | None = None,
    ) -> None:
        adapted = [(code, _adapt(k)) for code, k in (kernels or {}).items()]
        self._server = _native._Server(
            host,
            port,
            adapted,
            builtins,
            kernel_timeout,
            max_connections,
            max_bytes_per_connection,
            metrics,
        )

    @property
    def address(self) -> str:
        """``host:port`` it listens on."""
        return self._server.address

    @property
    def port(self) -> int:
        """The port it listens on."""
        return self._server.port

    @property
    def metrics_address(self) -> str | None:
        """``host:port`` of the metrics endpoint, or None without one."""
        return self._server.metrics_address

    @property
    def running(self) -> bool:
        """True until :meth:`stop`."""
        return self._server.running

    def stop(self) -> None:
        """Disconnects the clients and stops (waits for a kernel still running)."""
        self._server.stop()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False
