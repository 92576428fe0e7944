"""Large offloads that overlap transfer and compute.

::

    with naaice.Pipeline(7, chunk=8 << 20, depth=2) as pipeline:   # NAA from NAA_SPEC
        report = pipeline.run(array)        # in place, chunk by chunk
        assert report.ok

A :class:`Pipeline` keeps one chunk of the array in flight on each of ``depth`` connections
to the NAA, so that chunk k+1 moves while the NAA computes chunk k. It uses plain RPCs only,
so it works with any NAA. The NAA's kernel runs on each chunk as on any RPC: it must work
chunk by chunk (element-wise, or on independent blocks), finds the chunk's number in the
call's user bytes (big-endian, 24 bits) and gets the last chunk padded with zeros. An NAA that
takes fewer connections gets fewer (:attr:`Pipeline.depth`, at least 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _native


@dataclass(frozen=True)
class PipelineReport:
    """What :meth:`Pipeline.run` did."""

    chunks: int
    """Chunks sent (one RPC each)."""
    depth: int
    """Connections used."""
    failed_chunk: int | None
    """The first chunk whose kernel did not return success (its data and that of the chunks
    after it is left as it was; later chunks were not sent), or None."""
    return_code: int
    """That chunk's return code (0 when none failed)."""

    @property
    def ok(self) -> bool:
        """True when every chunk succeeded."""
        return self.failed_chunk is None


class Pipeline:
    """``depth`` connections (1-64) to the NAA for ``fn_code``, each with an in-place
    parameter of ``chunk`` bytes; the NAA from ``address`` (``host:port``), local mode
    (``local=True``) or ``NAA_SPEC``."""

    def __init__(self, fn_code: int, chunk: int, depth: int = 2, *,
                 address: str | None = None, local: bool = False) -> None:
        self._pipeline = _native._Pipeline(fn_code, chunk, depth, address, local)

    @property
    def depth(self) -> int:
        """Connections (chunks in flight at once); 0 once closed."""
        return self._pipeline.depth

    @property
    def chunk(self) -> int:
        """The chunk size in bytes."""
        return self._pipeline.chunk

    def run(self, data) -> PipelineReport:
        """Runs the kernel over ``data`` (a writable, contiguous buffer of plain data, e.g. a
        NumPy array) in place. The interpreter lock is released meanwhile; do not touch
        ``data`` from other threads until it returns."""
        return PipelineReport(*self._pipeline.run(data))

    def close(self) -> None:
        """Closes the connections."""
        self._pipeline.close()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False
