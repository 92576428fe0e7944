"""Cancel: abandons the RPC in flight at once; the handle reconnects on its next invoke."""

import numpy as np
import pytest

import naaice
from conftest import SLEEP


def test_cancel_then_reuse(where):
    p = np.zeros(16, dtype=np.uint8)
    with naaice.Naa(SLEEP, [p], [p], **where) as naa:
        assert not naa.cancel()  # nothing in flight
        naa.invoke(user_bytes=b"\x0a\x00\x00")  # the kernel sleeps 1 s
        assert naa.cancel()
        assert naa.state == "DISCONNECTED"
        with pytest.raises(naaice.CancelledError):
            naa.wait()
        p[:] = 40
        st = naa.run(user_bytes=0)  # reconnects, redoes the MRSP
        assert st.ok and (p == 41).all()
