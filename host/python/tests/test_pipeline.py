"""naaice.Pipeline: an array offloaded in chunks over several connections, every byte
checked, against a server whose kernel adds the chunk number + 1."""

import numpy as np
import pytest

import naaice
import naaice.swnaa

CHUNK = 4096


def add_chunk(params, call):
    k = int.from_bytes(bytes(call.user_bytes), "big")
    params[0][:] += np.uint8((k + 1) % 256)


def expected(a):
    idx = np.arange(a.size) // CHUNK
    return (a + ((idx + 1) % 256).astype(np.uint8)).astype(np.uint8)


def test_a_pipeline_runs_every_chunk_in_place():
    with naaice.swnaa.Server(kernels={30: add_chunk}, max_connections=4) as server:
        with naaice.Pipeline(30, CHUNK, depth=2, address=server.address) as p:
            assert (p.depth, p.chunk) == (2, CHUNK)
            data = (np.arange(5 * CHUNK + 77) % 251).astype(np.uint8)
            original = data.copy()
            report = p.run(data)
            assert report.ok and report.chunks == 6 and report.depth == 2
            np.testing.assert_array_equal(data, expected(original))
            # Any plain dtype: the pipeline sees its bytes.
            floats = np.zeros(CHUNK // 8 * 3)
            assert p.run(floats).chunks == 3
            with pytest.raises(naaice.BufferError):
                p.run(b"read-only bytes")
            with pytest.raises(naaice.BufferError):
                p.run(np.zeros(10, dtype=object))
        assert p.depth == 0
        with pytest.raises(ValueError):
            p.run(bytearray(4))


def test_one_connection_and_a_failing_kernel():
    def fail_at_two(params, call):
        if int.from_bytes(bytes(call.user_bytes), "big") == 2:
            return 0x21
        params[0][:] += 1

    with naaice.swnaa.Server(kernels={31: fail_at_two}, max_connections=1) as server:
        with naaice.Pipeline(31, CHUNK, depth=3, address=server.address) as p:
            assert p.depth == 1
            data = bytearray(5 * CHUNK)
            report = p.run(data)
            assert not report.ok
            assert (report.failed_chunk, report.return_code) == (2, 0x21)
            assert data[: 2 * CHUNK] == bytearray([1]) * (2 * CHUNK)
            assert data[2 * CHUNK:] == bytearray(3 * CHUNK)
