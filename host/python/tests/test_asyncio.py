"""asyncio: await naa.call() without blocking the loop, concurrency, task cancellation."""

import asyncio

import numpy as np

import naaice
from conftest import SLEEP


def test_await_call(where):
    async def main():
        p = np.zeros(1 << 20, dtype=np.uint8)
        with naaice.Naa(1, [p], [p], **where) as naa:
            for i in range(20):
                st = await naa.call()
                assert st.ok and p[0] == i + 1
        return p

    assert (asyncio.run(main()) == 20).all()


def test_many_concurrent_awaits_and_a_responsive_loop(where):
    """Four RPCs whose kernels sleep 0.3 s run concurrently while another task keeps
    ticking on the same loop: the awaits do not block it."""

    async def main():
        ps = [np.full(64, i, dtype=np.uint8) for i in range(4)]
        naas = [naaice.Naa(SLEEP, [p], [p], **where) for p in ps]
        ticks = 0
        stop = False

        async def ticker():
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.create_task(ticker())
        sts = await asyncio.gather(*(n.call(user_bytes=b"\x03\x00\x00") for n in naas))
        stop = True
        await t
        for n in naas:
            n.finalize()
        return ps, sts, ticks

    ps, sts, ticks = asyncio.run(main())
    assert all(s.ok for s in sts)
    assert [int(p[0]) for p in ps] == [1, 2, 3, 4]
    assert ticks > 3  # the loop ran other tasks while the RPCs were in flight


def test_cancelled_task_cancels_the_rpc(where):
    async def main():
        p = np.zeros(8, dtype=np.uint8)
        with naaice.Naa(SLEEP, [p], [p], **where) as naa:
            task = asyncio.create_task(naa.call(user_bytes=b"\x14\x00\x00"))  # 2 s
            await asyncio.sleep(0.2)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            else:
                raise AssertionError("the task was not cancelled")
            assert naa.state == "DISCONNECTED"
            st = await naa.call(user_bytes=0)  # reconnects
            return st, p

    st, p = asyncio.run(main())
    assert st.ok and p[0] >= 1


def test_rpc_error_reaches_the_task(where):
    async def main():
        p = np.zeros(8, dtype=np.uint8)
        with naaice.Naa(SLEEP, [p], [p], **where) as naa:
            try:
                await naa.call(user_bytes=b"\x14\x00\x00", timeout=0.2)
            except naaice.NaaTimeoutError:
                return True
        return False

    assert asyncio.run(main())


def test_handle_is_busy_while_awaited(where):
    async def main():
        p = np.zeros(8, dtype=np.uint8)
        with naaice.Naa(SLEEP, [p], [p], **where) as naa:
            task = asyncio.create_task(naa.call(user_bytes=b"\x02\x00\x00"))
            await asyncio.sleep(0.05)
            try:
                naa.invoke()
            except naaice.BusyError:
                busy = True
            else:
                busy = False
            assert (await task).ok
            return busy

    assert asyncio.run(main())
