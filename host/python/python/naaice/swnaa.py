"""A software NAA served from Python, with kernels written in Python.

::

    def scale(params, call):
        params[0].view(numpy.float64)[:] *= 2.0

    with naaice.swnaa.Server(port=12345, kernels={10: scale}) as server:
        ...   # clients: NAA_SPEC=127.0.0.1:12345:10:1

It is the library's software NAA (the one ``naaice-swnaa`` runs), serving on background
threads; kernels are as in :mod:`naaice.local`. Clients in any language (C, Fortran, Rust,
Python) reach it at ``server.address``.

From the command line, it serves the Python kernels of your modules like ``naaice-swnaa``
serves C ones::

    python -m naaice.swnaa --port 12345 --kernel 7=mymodule:scale --kernel 8=mymodule:axpy

``--kernels FILE`` reads them from a TOML file (``[[kernel]]`` tables with ``code``,
``module``, ``function``, optional ``name`` and ``timeout``); SIGHUP imports the modules again,
reads the file again and serves the new kernels from each connection's next call.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import stat
import sys
import threading
import tomllib
from dataclasses import dataclass

from . import _native
from .local import Kernel, _adapt

DEFAULT_MAX_CONNECTIONS = 64
"""Default of :class:`Server`'s ``max_connections`` (``naaice-swnaa`` defaults to the number of
cores instead, a production NAA's choice)."""


def _entries(kernels: dict[int, Kernel]) -> list[tuple]:
    """Kernels as the native server takes them, named by their functions' names."""
    return [(code, _adapt(k), getattr(k, "__name__", None), None) for code, k in kernels.items()]


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
        adapted = _entries(kernels or {})
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
    def kernels(self) -> dict[int, str]:
        """The function codes served, with their kernels' names."""
        return dict(self._server.kernels)

    def set_kernels(self, kernels: dict[int, Kernel], *, builtins: bool = True) -> None:
        """Serves ``kernels`` (plus the built-ins unless ``builtins=False``) instead of the
        kernels served now, from each connection's next call; an RPC running finishes on
        its kernel."""
        adapted = _entries(kernels)
        self._server.set_kernels(adapted, builtins)

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


# ---- the command line: python -m naaice.swnaa ------------------------------------------------


class KernelLoadError(Exception):
    """A kernel of the command line or the kernels file cannot be served."""


@dataclass
class _KernelSpec:
    code: int
    module: str
    function: str
    name: str | None
    timeout: float | None
    origin: str


def _parse_kernel(text: str) -> _KernelSpec:
    """``CODE=MODULE:FUNCTION`` (``--kernel``)."""
    code, sep, rest = text.partition("=")
    module, colon, function = rest.rpartition(":")
    if not sep or not colon or not module or not function:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected CODE=MODULE:FUNCTION, e.g. 7=mymodule:scale"
        )
    try:
        fn_code = int(code)
    except ValueError:
        fn_code = 0
    if not 1 <= fn_code <= 127:
        raise argparse.ArgumentTypeError(f"{text!r}: function code {code!r} is not 1-127")
    return _KernelSpec(fn_code, module, function, None, None, f"--kernel {text}")


_MAX_KERNELS_FILE = 1 << 20
"""Longest kernels file read (a file of 127 kernels is a few KiB)."""


def _read_kernels_file(path: str) -> list[_KernelSpec]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise KernelLoadError(f"kernels file {path}: not a regular file")
        with open(path, "rb") as f:
            raw = f.read(_MAX_KERNELS_FILE + 1)
        if len(raw) > _MAX_KERNELS_FILE:
            raise KernelLoadError(
                f"kernels file {path}: larger than {_MAX_KERNELS_FILE >> 10} KiB"
            )
        doc = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise KernelLoadError(f"kernels file {path}: {e}") from None
    specs = []
    allowed = {"code", "module", "function", "name", "timeout"}
    entries = doc.get("kernel", [])
    if not isinstance(entries, list) or set(doc) - {"kernel"}:
        raise KernelLoadError(f"kernels file {path}: expected [[kernel]] tables only")
    for i, e in enumerate(entries, 1):
        where = f"kernels file {path}: kernel {i}"
        if not isinstance(e, dict):
            raise KernelLoadError(f"{where}: not a table")
        unknown = set(e) - allowed
        if unknown:
            raise KernelLoadError(f"{where}: unknown field(s) {sorted(unknown)}")
        code = e.get("code")
        if not isinstance(code, int) or not 1 <= code <= 127:
            raise KernelLoadError(f"{where}: code {code!r} is not 1-127")
        for key in ("module", "function"):
            if not isinstance(e.get(key), str) or not e[key]:
                raise KernelLoadError(f"{where}: {key} missing (a string)")
        timeout = e.get("timeout")
        if timeout is not None and (
            not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0
        ):
            raise KernelLoadError(f"{where}: timeout must be seconds, more than 0")
        name = e.get("name")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise KernelLoadError(f"{where}: name must be a non-empty string")
        specs.append(
            _KernelSpec(code, e["module"], e["function"], name,
                        None if timeout is None else float(timeout), f"{path} kernel {i}")
        )
    return specs


def _load(specs: list[_KernelSpec], reload_modules: bool) -> list[tuple]:
    """The kernels as the native server takes them; modules imported (again on a reload)."""
    seen: dict[int, str] = {}
    entries = []
    reloaded: set[str] = set()
    for spec in specs:
        if spec.code in seen:
            raise KernelLoadError(
                f"function code {spec.code}: {spec.origin} collides with {seen[spec.code]} "
                "(one kernel per code)"
            )
        seen[spec.code] = spec.origin
        try:
            module = importlib.import_module(spec.module)
            if reload_modules and spec.module not in reloaded:
                module = importlib.reload(module)
                reloaded.add(spec.module)
        except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
            raise KernelLoadError(
                f"{spec.origin}: cannot import {spec.module}: {type(e).__name__}: {e}"
            ) from None
        func = module
        for part in spec.function.split("."):
            func = getattr(func, part, None)
            if func is None:
                raise KernelLoadError(f"{spec.origin}: {spec.module} has no {spec.function}")
        if not callable(func):
            raise KernelLoadError(f"{spec.origin}: {spec.module}.{spec.function} is not callable")
        entries.append((spec.code, _adapt(func), spec.name or spec.function, spec.timeout))
    return entries


def _describe(kernels: list[tuple[int, str]]) -> str:
    return ", ".join(f"{code} {name}" for code, name in kernels) or "none"


def main(argv: list[str] | None = None) -> int:
    """``python -m naaice.swnaa``: a software NAA serving Python kernels."""
    parser = argparse.ArgumentParser(
        prog="python -m naaice.swnaa",
        description="A software NAA serving the Python kernels of your modules (and the "
        "built-ins 1 add1, 2 add2, 3 empty). A kernel is kernel(params, call) as in "
        "naaice.local. SIGHUP imports the modules and reads --kernels again; SIGINT and "
        "SIGTERM stop it. The transport is chosen by NAAICE_TRANSPORT.",
    )
    parser.add_argument("--address", default="::", help="address to listen on (default ::)")
    parser.add_argument("--port", type=int, default=12345, help="port (0: a free one)")
    parser.add_argument(
        "--kernel", action="append", default=[], type=_parse_kernel,
        metavar="CODE=MODULE:FUNCTION",
        help="serve FUNCTION of MODULE (imported from the current folder or sys.path) at "
        "CODE (repeatable)",
    )
    parser.add_argument("--kernels", metavar="FILE",
                        help="a TOML file of [[kernel]] tables: code, module, function, "
                        "name, timeout (seconds)")
    parser.add_argument("--no-builtins", action="store_true",
                        help="serve only the kernels given, not the built-ins 1-3")
    parser.add_argument("--kernel-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long a kernel may run before KERNEL_TIMEOUT (default 10)")
    parser.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS)
    parser.add_argument("--metrics", metavar="HOST:PORT",
                        help="serve Prometheus metrics at HOST:PORT (GET /metrics)")
    args = parser.parse_args(argv)
    if args.max_connections < 1:
        parser.error("--max-connections must be at least 1")

    def kernels(reload_modules: bool) -> list[tuple]:
        specs = list(args.kernel)
        if args.kernels:
            specs += _read_kernels_file(args.kernels)
        return _load(specs, reload_modules)

    try:
        entries = kernels(False)
    except KernelLoadError as e:
        print(f"naaice.swnaa: {e}", file=sys.stderr)
        return 1
    try:
        native = _native._Server(
            args.address, args.port, entries, not args.no_builtins, args.kernel_timeout,
            args.max_connections, None, args.metrics,
        )
    except Exception as e:  # noqa: BLE001 - the server could not start: say why
        print(f"naaice.swnaa: cannot listen on {args.address} port {args.port}: {e}",
              file=sys.stderr)
        return 1
    print(
        f"naaice.swnaa listening on {native.address} (kernels {_describe(native.kernels)})",
        file=sys.stderr, flush=True,
    )
    if native.metrics_address:
        print(f"  metrics: http://{native.metrics_address}/metrics", file=sys.stderr, flush=True)
    woken = threading.Event()
    signals: list[int] = []

    def on_signal(signum, frame):
        signals.append(signum)
        woken.set()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    try:
        while True:
            woken.wait()
            woken.clear()
            got, signals[:] = list(signals), []
            if signal.SIGINT in got or signal.SIGTERM in got:
                break
            try:
                native.set_kernels(kernels(True), not args.no_builtins)
                print(f"naaice.swnaa: SIGHUP: kernels reloaded: {_describe(native.kernels)}",
                      file=sys.stderr, flush=True)
            except (KernelLoadError, ValueError) as e:
                print(f"naaice.swnaa: SIGHUP: kernels not reloaded ({e}); still serving "
                      "the ones loaded before", file=sys.stderr, flush=True)
    finally:
        native.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
