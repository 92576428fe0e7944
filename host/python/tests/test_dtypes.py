"""Every NumPy dtype as a parameter: plain data is accepted and round-trips through the NAA;
anything holding object references (or that NumPy cannot export as a buffer) is refused
with naaice.BufferError before the NAA could overwrite it."""

import numpy as np
import pytest

import naaice

# (dtype, accepted?) for every kind of dtype NumPy has.
TABLE = [
    ("?", True),  # bool
    ("b", True), ("B", True), ("h", True), ("H", True), ("i", True), ("I", True),
    ("l", True), ("L", True), ("q", True), ("Q", True), ("n", True), ("N", True),
    ("p", True), ("P", True),  # intp, uintp
    ("e", True), ("f", True), ("d", True), ("g", True),  # float16 ... longdouble
    ("F", True), ("D", True), ("G", True),  # complex64 ... clongdouble
    (">i4", True), ("<f8", True),  # explicit byte orders
    ("S5", True),  # bytes
    ("U3", True),  # str (UCS-4)
    ("V8", True),  # void (raw bytes)
    ([("a", "<i4"), ("b", "<f8")], True),  # structured
    (np.dtype([("a", "<i4"), ("b", "<f8")], align=True), True),  # with padding
    ([("a", "<i2", (2, 3)), ("s", "S3"), ("c", "c16")], True),  # sub-array, bytes, complex
    ([("n", [("x", "f4"), ("y", "?")])], True),  # nested
    ("O", False),  # object: PyObject pointers
    ([("a", "i4"), ("o", "O")], False),  # structured with an object field
    ([("n", [("x", "f4"), ("o", "O")])], False),  # nested structure with an object field
    ([("o", "O", (2,))], False),  # sub-array of objects
    ("M8[ns]", False), ("M8[D]", False),  # datetime64: NumPy exports no buffer for it
    ("m8[s]", False),  # timedelta64: neither
    (np.dtypes.StringDType(), False),  # variable-width strings: pointers into an arena
]


def ident(dt):
    return str(np.dtype(dt))


def test_the_table_covers_every_type_code():
    # The codes as written in the table ("n" is "l" again once a dtype).
    simple = {dt[0] for dt, _ in TABLE if isinstance(dt, str)}
    assert set(np.typecodes["All"]) <= simple, set(np.typecodes["All"]) - simple


@pytest.mark.parametrize("dt, accepted", TABLE, ids=[ident(dt) for dt, _ in TABLE])
def test_dtype(where, dt, accepted):
    a = np.zeros(6, dtype=dt)
    if not accepted:
        with pytest.raises(naaice.BufferError, match="input 0 .*(not plain data|does not "
                                                      "export a buffer)"):
            naaice.Naa(1, [a], [a], **where)
        return
    raw = a.view(np.uint8).reshape(-1)  # the same memory as bytes
    raw[:] = np.arange(raw.size, dtype=np.uint8)
    before = raw.copy()
    with naaice.Naa(1, [a], [a], **where) as naa:  # kernel 1 adds 1 per byte
        assert naa.addresses == [a.ctypes.data] * 2  # in place: the array itself
        assert naa.run().ok
    assert (raw == before + 1).all()
    # The array stays usable. (Bytes plus one are no valid UCS-4 code points: NumPy raises
    # reading them as str, so a "U" array is only copied.)
    a.copy()
    if a.dtype.kind != "U":
        repr(a)


def test_object_refusal_names_the_format(where):
    with pytest.raises(naaice.BufferError, match=r"holds Python object references"):
        naaice.Naa(1, [np.array([object(), object()], dtype=object)], [],
                   **where)
    s = np.zeros(2, dtype=[("a", "i4"), ("o", "O")])
    with pytest.raises(naaice.BufferError, match=r'output 0 .*"T\{i:a:O:o:\}"'):
        naaice.Naa(1, [bytearray(8)], [s], **where)
