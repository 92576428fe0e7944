"""Set waits: wait_any / test_any / wait_all over handles on any function codes."""

import numpy as np
import pytest

import naaice
from conftest import SLEEP


def test_wait_any_reports_each_once_in_finishing_order(where):
    ps = [np.zeros(8, dtype=np.uint8) for _ in range(3)]
    naas = [naaice.Naa(SLEEP, [p], [p], **where) for p in ps]
    for n, tenths in zip(naas, (6, 0, 3)):
        n.invoke(user_bytes=bytes([tenths, 0, 0]))
    order = []
    while (done := naaice.wait_any(naas)) is not None:
        i, st = done
        assert st.ok
        order.append(i)
    assert order == [1, 2, 0]
    assert naaice.test_any(naas) is None  # nothing in flight any more
    for n in naas:
        n.finalize()
    assert all(p[0] == 1 for p in ps)


def test_wait_all_mixes_outcomes(where):
    ps = [np.zeros(8, dtype=np.uint8) for _ in range(3)]
    naas = [naaice.Naa(SLEEP, [p], [p], **where) for p in ps]
    naas[0].invoke(user_bytes=b"\x01\x00\x00")
    naas[2].invoke(user_bytes=b"\x14\x00\x00", timeout=0.2)  # fails: deadline
    out = naaice.wait_all(naas)
    assert out[0].ok and out[1] is None
    assert isinstance(out[2], naaice.NaaTimeoutError) and out[2].index == 2
    for n in naas:
        n.finalize()


def test_wait_any_raises_with_index(where):
    p = np.zeros(8, dtype=np.uint8)
    q = np.zeros(8, dtype=np.uint8)
    with naaice.Naa(SLEEP, [p], [p], **where) as a, \
            naaice.Naa(SLEEP, [q], [q], **where) as b:
        b.invoke(user_bytes=b"\x14\x00\x00", timeout=0.2)
        with pytest.raises(naaice.NaaTimeoutError) as e:
            naaice.wait_any([a, b])
        assert e.value.index == 1
        with pytest.raises(naaice.InvalidArgumentError, match="twice"):
            naaice.wait_any([a, a])
