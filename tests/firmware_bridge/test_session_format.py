import zlib

import numpy as np
import pytest

from firmware_bridge.session_format import HEADER, SessionFormatError, encode_chunk, scan


@pytest.mark.parametrize("fmt", ["int8", "int16", "float32"])
def test_chunks_round_trip(fmt):
    block = (np.arange(30).reshape(10, 3) - 15).astype(np.float32)
    result = scan(encode_chunk(7, block, fmt) + encode_chunk(17, block, fmt))
    assert [c.first_sample for c in result.chunks] == [7, 17]
    assert np.array_equal(result.chunks[1].samples.astype(np.float32), block)
    assert result.corrupt_chunks == 0 and result.lost_tail_bytes == 0


def test_header_layout_is_28_bytes_little_endian():
    chunk = encode_chunk(1, np.array([[1, 2]], dtype=np.int16), "int16")
    assert HEADER.size == 28 and chunk[:4] == b"TNSC"
    assert chunk[-4:] == b"\x01\x00\x02\x00"
    assert int.from_bytes(chunk[24:28], "little") == zlib.crc32(chunk[28:])


def test_corrupt_chunk_is_skipped_and_counted():
    good = encode_chunk(0, np.ones((5, 2)), "int16")
    bad = bytearray(encode_chunk(5, np.ones((5, 2)), "int16"))
    bad[-1] ^= 0xFF
    result = scan(good + bytes(bad) + b"garbage!" + good)
    # The bad chunk and the garbage after it are one corrupt stretch, skipped up to the next magic.
    assert len(result.chunks) == 2 and result.corrupt_chunks == 1
    assert scan(b"noise" + good).corrupt_chunks == 1


@pytest.mark.parametrize("cut", [1, 3, 10, 29, 35])
def test_torn_tail_is_measured(cut):
    good = encode_chunk(0, np.ones((5, 2)), "int16")
    torn = encode_chunk(5, np.ones((5, 2)), "int16")[:cut]
    result = scan(good + torn)
    assert len(result.chunks) == 1 and result.lost_tail_bytes == cut


def test_bad_input_to_the_encoder():
    with pytest.raises(SessionFormatError, match="unknown sample format"):
        encode_chunk(0, np.ones((2, 2)), "int12")
    with pytest.raises(SessionFormatError, match="shape \\(n, channels\\)"):
        encode_chunk(0, np.ones(4), "int16")
