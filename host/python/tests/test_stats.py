"""Client statistics from Python: ``naa.stats`` (a dataclass) after successes, an NAA error
and a timeout, and ``naaice.process_stats()`` once handles ended."""

import time

import numpy as np
import pytest

import naaice
from naaice import swnaa


@pytest.fixture(scope="module")
def server():
    s = swnaa.Server()
    yield s
    s.stop()


def test_a_handles_stats(where):
    data = np.zeros(64, dtype=np.uint8)
    with naaice.Naa(1, [data], [data], **where) as naa:
        fresh = naa.stats
        assert isinstance(fresh, naaice.Stats)
        assert fresh.rpcs == 0 and fresh.connections == 1 and fresh.handles == 1
        assert fresh.latency_p50 is None
        assert fresh.connect_time > 0 and fresh.mrsp_time > 0
        for _ in range(10):
            assert naa.run().ok
        # An unknown function code: the NAA answers with an error (counted as an NAA error).
        status = naa.run(fn_code=99)
        assert not status.ok
        s = naa.stats
        assert s.rpcs == 11
        assert s.errors.naa == 1 and s.errors.total == 1
        assert s.bytes_sent == 11 * 64
        assert s.bytes_received == 10 * 64
        assert 0 < s.latency_p50 <= s.latency_p99 <= s.latency_max
        assert s.latency_mean > 0
        with pytest.raises(AttributeError):
            s.rpcs = 0  # frozen


def test_the_process_sums_up_the_handles_that_ended(where):
    before = naaice.process_stats()
    data = np.zeros(16, dtype=np.uint8)
    for _ in range(2):
        with naaice.Naa(1, [data], [data], **where) as naa:
            for _ in range(3):
                assert naa.run().ok
    after = naaice.process_stats()
    assert after.handles == before.handles + 2
    assert after.rpcs == before.rpcs + 6
    assert after.connections == before.connections + 2


def test_a_python_software_naa_serves_its_metrics_when_asked():
    import urllib.request

    with swnaa.Server() as plain:
        assert plain.metrics_address is None
    with swnaa.Server(metrics="127.0.0.1:0") as server:
        assert server.metrics_address is not None
        data = np.zeros(8, dtype=np.uint8)
        with naaice.Naa(1, [data], [data], address=server.address) as naa:
            for _ in range(3):
                assert naa.run().ok
        url = f"http://{server.metrics_address}/metrics"
        # The worker counts an RPC just after posting its answer: look again for a while.
        want = 'naaice_naa_rpcs_total{fncode="1",rc="0"} 3'
        deadline = time.monotonic() + 10
        text = ""
        while want not in text and time.monotonic() < deadline:
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            if want not in text:
                time.sleep(0.05)
        assert want in text, text
    with pytest.raises(naaice.InvalidArgumentError):
        swnaa.Server(metrics="no such host.invalid:1")
