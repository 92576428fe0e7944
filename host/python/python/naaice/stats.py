"""Client statistics: what a handle's RPCs (or all the process's ended handles') did.

``naa.stats`` gives a handle's, :func:`process_stats` the process's handles that ended
(finalized or dropped). ``NAAICE_STATS=1`` prints the process's in one line at exit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Errors:
    """Failed RPCs and connects, by kind."""

    naa: int
    """The NAA answered with an error return code."""
    timeout: int
    """A deadline passed (connect, MRSP or RPC)."""
    transport: int
    """The transport failed (connect refused, connection lost)."""
    protocol: int
    """The peer broke the protocol, or the MRSP was refused."""
    other: int
    """Anything else."""

    @property
    def total(self) -> int:
        """All errors."""
        return self.naa + self.timeout + self.transport + self.protocol + self.other


@dataclass(frozen=True)
class Stats:
    """A handle's (or the process's) client statistics. Times are in seconds; the latencies
    (invoke to completion) are ``None`` before the first RPC."""

    handles: int
    """Handles summed up (1 for a handle's own)."""
    connections: int
    """Connections made, MRSP done (a handle reconnects after a cancel)."""
    rpcs: int
    """RPCs the NAA answered, whatever their return code."""
    errors: Errors
    """Errors by kind."""
    bytes_sent: int
    """Bytes the RPCs wrote to the NAA."""
    bytes_received: int
    """Bytes the NAA wrote back."""
    connect_time: float
    """Time spent connecting, over all connections."""
    mrsp_time: float
    """Time spent in the memory-region setup, over all connections."""
    latency_p50: Optional[float]
    latency_p90: Optional[float]
    latency_p99: Optional[float]
    latency_max: Optional[float]
    latency_mean: Optional[float]

    @classmethod
    def _from_native(cls, d: dict[str, Any]) -> "Stats":
        return cls(**{**d, "errors": Errors(**d["errors"])})


def process_stats() -> Stats:
    """The statistics of the process's handles that ended (finalized or dropped)."""
    from . import _native

    return Stats._from_native(_native._process_stats())
