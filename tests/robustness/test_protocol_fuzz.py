"""Fuzzing the serial frame decoder: whatever arrives on the wire, the decoder raises nothing,
holds at most one frame's worth of bytes, sizes nothing from a length field, and picks up the
next intact frame after the garbage.

Frames here are real `encode_frame` output; damage is what a noisy UART does (bit flips, dropped
or inserted bytes, a cut-off frame) plus forged frames with a valid CRC around lying fields.
"""

import struct
import tracemalloc
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firmware_bridge.errors import BridgeError
from firmware_bridge.protocol import (
    MAX_PAYLOAD,
    VERSION,
    Error,
    Hello,
    Mark,
    Message,
    MessageType,
    Ping,
    Pong,
    ProtocolError,
    Samples,
    StreamDecoder,
    cobs_decode,
    cobs_encode,
    decode_frame,
    decode_payload,
    encode_frame,
    encode_payload,
)

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MESSAGE_TYPES = (Hello, Samples, Mark, Ping, Pong, Error)

messages = st.one_of(
    st.builds(Hello, st.text(max_size=20), st.text(max_size=10), st.integers(1, 255),
              st.integers(1, 2**32 - 1).map(lambda mhz: mhz / 1000), st.sampled_from(["int8", "int16", "float32"])),
    st.builds(lambda first, n, c, dtype: Samples(first, np.arange(n * c).astype(dtype).reshape(n, c)),
              st.integers(0, 2**64 - 1), st.integers(0, 40), st.integers(1, 8),
              st.sampled_from([np.int8, np.int16, np.float32])),
    st.builds(Mark, st.integers(0, 2**64 - 1), st.integers(0, 65535), st.text(max_size=30)),
    st.builds(Ping, st.integers(0, 2**32 - 1)),
    st.builds(Pong, st.integers(0, 2**32 - 1)),
    st.builds(Error, st.integers(0, 65535), st.text(max_size=30)),
)


def _feed_in_chunks(decoder: StreamDecoder, stream: bytes, cuts: list[int]) -> list[tuple[int, Message]]:
    got, position, index = [], 0, 0
    while position < len(stream):
        size = cuts[index % len(cuts)]
        got += decoder.feed(stream[position:position + size])
        assert decoder.buffered <= decoder._max
        position += size
        index += 1
    return got


def _forged_frame(kind: int, payload: bytes, length: int | None = None, version: int = VERSION) -> bytes:
    """A frame whose CRC is right but whose fields may lie (what the CRC cannot catch)."""
    body = struct.pack("<BBHH", version, kind, 0, len(payload) if length is None else length) + payload
    return cobs_encode(body + struct.pack("<I", zlib.crc32(body)))


def _mutate(frame: bytes, data) -> bytes:
    """A valid frame (delimiter removed) damaged as a UART would: flips, drops, insertions, truncation."""
    damaged = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(["flip", "drop", "insert", "truncate"]))
        if not damaged:
            break
        at = data.draw(st.integers(0, len(damaged) - 1))
        if how == "flip":
            damaged[at] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "drop":
            del damaged[at]
        elif how == "insert":
            damaged.insert(at, data.draw(st.integers(1, 255)))  # a 0x00 would just split the frame
        else:
            del damaged[at:]
    return bytes(damaged)


@FUZZ
@given(st.binary(max_size=3000), st.lists(st.integers(1, 700), min_size=1, max_size=8))
def test_random_bytes_never_raise_and_stay_bounded(noise, cuts):
    decoder = StreamDecoder(max_frame_bytes=512)
    got = _feed_in_chunks(decoder, noise, cuts)
    assert all(isinstance(s, int) and isinstance(m, MESSAGE_TYPES) for s, m in got)
    stats = decoder.stats
    assert stats.bytes == len(noise)
    # Every byte is either buffered, part of a decoded frame, discarded, or a delimiter.
    assert stats.discarded_bytes + decoder.buffered <= len(noise)


@FUZZ
@given(st.data(), st.lists(messages, min_size=1, max_size=5), messages,
       st.lists(st.integers(1, 300), min_size=1, max_size=6))
def test_damaged_frames_are_dropped_and_the_next_intact_frame_is_decoded(data, sent, after, cuts):
    frames = [encode_frame(m, i) for i, m in enumerate(sent)]
    damaged = [_mutate(f[:-1], data) for f in frames]
    stream = b"\x00".join(damaged) + b"\x00" + encode_frame(after, 999)
    decoder = StreamDecoder()
    got = _feed_in_chunks(decoder, stream, cuts)
    # CRC-32 catches every burst this short, so nothing damaged is delivered as if intact...
    assert all((s, m) == (i, sent[i]) for s, m in got[:-1] for i in [s])
    # ...and the frame after the damage always arrives.
    assert got[-1] == (999, after)
    assert decoder.stats.frames_ok == len(got)


@FUZZ
@given(st.binary(max_size=2000), messages, st.lists(st.integers(1, 500), min_size=1, max_size=6))
def test_a_frame_after_garbage_and_a_delimiter_is_never_lost(garbage, message, cuts):
    frame = encode_frame(message, 7)
    stream = garbage + b"\x00" + frame
    # A small limit makes long garbage overflow it; the frame itself must fit (a 608-byte SAMPLES frame
    # under a 600-byte limit is rightly refused).
    got = _feed_in_chunks(StreamDecoder(max_frame_bytes=max(600, len(frame))), stream, cuts)
    assert got and got[-1] == (7, message)


@FUZZ
@given(st.integers(0, 255), st.binary(max_size=300))
def test_payload_parsing_raises_only_protocol_errors(kind, payload):
    try:
        message = decode_payload(kind, payload)
    except ProtocolError:
        return
    assert isinstance(message, MESSAGE_TYPES)


@FUZZ
@given(st.integers(0, 255), st.integers(0, 255), st.binary(max_size=300), st.integers(0, 65535))
def test_forged_frames_with_a_valid_crc_raise_only_protocol_errors(version, kind, payload, length):
    try:
        sequence, message = decode_frame(_forged_frame(kind, payload, length, version))
    except ProtocolError:
        return
    assert version == VERSION and length == len(payload) and isinstance(message, MESSAGE_TYPES)


@FUZZ
@given(st.binary(max_size=600))
def test_cobs_decoding_of_any_bytes_raises_only_protocol_errors(data):
    try:
        assert isinstance(cobs_decode(data), bytes)
    except ProtocolError:
        pass


@pytest.mark.parametrize("payload", [
    # SAMPLES claiming 65535 samples x 255 channels of float32 (67 MB) in a 12-byte payload.
    struct.pack("<QHBB", 0, 0xFFFF, 255, 3),
    # ...and the same claim with a few real bytes behind it.
    struct.pack("<QHBB", 0, 0xFFFF, 255, 3) + bytes(range(1, 200)),
    # HELLO whose id length byte points far past the payload.
    bytes([255]) + b"x",
])
def test_lying_size_fields_are_refused_without_allocating(payload):
    frame = _forged_frame(MessageType.SAMPLES if len(payload) != 2 else MessageType.HELLO, payload)
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError):
            decode_frame(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


@pytest.mark.parametrize("length", [0xFFFF, MAX_PAYLOAD + 1, 0])
def test_a_length_field_that_disagrees_with_the_bytes_is_refused(length):
    with pytest.raises(ProtocolError, match="payload bytes"):
        decode_frame(_forged_frame(MessageType.PING, b"\x01\x02\x03\x04", length=length))


@pytest.mark.parametrize("tail", [b"", b"\x00"], ids=["no delimiter", "delimiter"])
def test_a_huge_chunk_is_never_buffered_or_copied_whole(tail):
    # 4 MiB without a zero byte in one feed (a line stuck high, a wrong baud rate), with and
    # without a delimiter at its end: the decoder must not copy it into its buffer.
    junk = b"\xff" * (4 << 20) + tail
    good = encode_frame(Ping(5), 1)
    decoder = StreamDecoder()
    tracemalloc.start()
    try:
        first = decoder.feed(junk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first == [] and decoder.buffered == 0
    assert peak < 4 * decoder._max + 64 * 1024
    assert decoder.stats.bad_frames == 1 and decoder.stats.discarded_bytes == len(junk)
    assert decoder.feed(b"\x00" + good) == [(1, Ping(5))]


def test_the_largest_frame_passes_and_one_byte_more_is_refused():
    biggest = Samples(0, np.zeros(((MAX_PAYLOAD - 12) // 4, 1), dtype=np.float32) + 1)
    frame = encode_frame(biggest, 0)
    assert StreamDecoder().feed(frame) == [(0, biggest)]
    small = StreamDecoder(max_frame_bytes=len(frame) - 2)  # the frame without its delimiter is one byte over
    assert small.feed(frame + encode_frame(Ping(1), 1)) == [(1, Ping(1))]
    assert small.stats.bad_frames == 1


def test_bridge_errors_only_from_encoding_values_that_do_not_fit():
    for message in [Mark(-1, 0), Ping(2**32), Samples(-5, np.zeros((1, 1), np.int8)), Error(70000),
                    Hello("x", "1", 1, float("nan"), "int8"), Hello("x", "1", 1, 0.0, "int8"),
                    Hello("x" * 300, "1", 1, 10.0, "int8")]:
        with pytest.raises(BridgeError):
            encode_payload(message)


def test_a_hello_with_no_channels_or_no_rate_is_refused():
    for channels, rate in [(0, 200_000), (8, 0)]:
        payload = b"\x01a\x011" + struct.pack("<BIB", channels, rate, 1)
        with pytest.raises(ProtocolError, match="HELLO"):
            decode_payload(MessageType.HELLO, payload)
