"""How the property tests damage a real file: what a bad disk, a cut download or the wrong file does."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def damaged(draw, original: bytes) -> bytes:
    """A damaged copy of `original`: random bytes, a truncation, bit flips or spliced junk."""
    kind = draw(st.sampled_from(["random", "truncate", "flip", "splice"]))
    if kind == "random":
        return draw(st.binary(max_size=2 * len(original)))
    if kind == "truncate":
        return original[:draw(st.integers(0, max(0, len(original) - 1)))]
    data = bytearray(original)
    if kind == "flip":
        for bit in draw(st.lists(st.integers(0, len(data) * 8 - 1), min_size=1, max_size=8)):
            data[bit // 8] ^= 1 << (bit % 8)
        return bytes(data)
    at = draw(st.integers(0, len(data)))
    return bytes(data[:at]) + draw(st.binary(min_size=1, max_size=64)) + bytes(data[at:])
