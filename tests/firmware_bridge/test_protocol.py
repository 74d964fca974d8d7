import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge.protocol import (
    CAN_TEST,
    ChipTest,
    Error,
    Hello,
    Mark,
    Ping,
    Pong,
    ProtocolError,
    Samples,
    StreamDecoder,
    cobs_decode,
    cobs_encode,
    decode_frame,
    encode_frame,
)

MESSAGES = [
    Hello("myo-bridge-01", "1.2.0", 8, 200.0, "int8"),
    Hello("vib", "0.1", 1, 12_000.0, "int16"),
    Samples(0, np.arange(-8, 8, dtype=np.int8).reshape(2, 8)),
    Samples(2**40, np.arange(30, dtype=np.int16).reshape(10, 3) * -300),
    Samples(5, np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)),
    Mark(1234, 7, "button"),
    Ping(0xDEADBEEF),
    Pong(42),
    Error(3, "ADC overrun"),
    Hello("emg-chip", "2.0", 8, 200.0, "int8", capabilities=CAN_TEST),
    ChipTest(b"db load 128%"),
    ChipTest(b"m-results-[1,-2]\r\nm-ready\r\n"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_type_round_trips(message):
    frame = encode_frame(message, sequence=513)
    assert frame.endswith(b"\x00") and b"\x00" not in frame[:-1]
    assert decode_frame(frame[:-1]) == (513, message)


@given(st.binary(max_size=1200))
def test_cobs_round_trips_and_removes_zeros(data):
    encoded = cobs_encode(data)
    assert b"\x00" not in encoded
    assert cobs_decode(encoded) == data
    assert len(encoded) <= len(data) + len(data) // 254 + 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(MESSAGES) - 1), min_size=1, max_size=30),
       st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=50), st.binary(max_size=40))
def test_stream_split_at_any_points_decodes_the_same(picks, cuts, garbage):
    frames = [encode_frame(MESSAGES[p], i) for i, p in enumerate(picks)]
    # Garbage before the first frame is discarded at its first delimiter.
    stream = garbage + b"\x00" + b"".join(frames)
    decoder = StreamDecoder()
    got, position, index = [], 0, 0
    while position < len(stream):
        size = cuts[index % len(cuts)]
        got += decoder.feed(stream[position:position + size])
        position += size
        index += 1
    assert got == [(i, MESSAGES[p]) for i, p in enumerate(picks)]
    assert decoder.stats.gaps == 0 and decoder.stats.frames_ok == len(picks)


def test_garbage_without_delimiter_is_bounded():
    decoder = StreamDecoder(max_frame_bytes=100)
    assert decoder.feed(bytes(range(1, 200))) == []
    assert decoder.stats.discarded_bytes == 199
    assert decoder.feed(encode_frame(Ping(1), 0)) == [(0, Ping(1))]


def test_noisy_link_accepts_no_corrupted_frame_and_counts_gaps_exactly():
    rng = random.Random(1)
    nprng = np.random.default_rng(1)
    originals, frames = [], []
    for sequence in range(10_000):
        kind = rng.random()
        if kind < 0.8:
            message = Samples(sequence * 16, nprng.integers(-128, 128, size=(16, 8)).astype(np.int8))
        elif kind < 0.9:
            message = Mark(sequence, rng.randrange(65536), "m")
        else:
            message = Ping(rng.randrange(2**32))
        originals.append(message)
        frames.append(encode_frame(message, sequence))
    # 1 % of bytes are hit: half flipped, half dropped.
    stream, touched = bytearray(), set()
    for number, frame in enumerate(frames):
        for byte in frame:
            roll = rng.random()
            if roll < 0.005:
                stream.append(byte ^ (1 << rng.randrange(8)))
                touched.add(number)
            elif roll < 0.01:
                touched.add(number)
            else:
                stream.append(byte)
    decoder = StreamDecoder()
    delivered = {}
    for start in range(0, len(stream), 997):
        for sequence, message in decoder.feed(bytes(stream[start:start + 997])):
            delivered[sequence] = message
    # No corrupted frame accepted: everything delivered is exactly what was sent.
    assert all(originals[s] == m for s, m in delivered.items())
    # Every intact frame (its bytes and the delimiter before it untouched) is delivered.
    intact = [n for n in range(len(frames)) if n not in touched and (n == 0 or n - 1 not in touched)]
    assert set(intact) <= set(delivered)
    # Gaps are counted exactly: every frame between the first and last delivered that did not arrive.
    first, last = min(delivered), max(delivered)
    assert decoder.stats.gaps == (last - first + 1) - len(delivered)
    assert decoder.stats.frames_ok == len(delivered)
    # ~150-byte frames at 1 % byte errors: about a third arrive intact; the corruption really bit.
    assert 0.2 < len(delivered) / len(frames) < 0.95


def test_damaged_frames_are_rejected_with_a_reason():
    frame = bytearray(encode_frame(Ping(7), 3)[:-1])
    frame[3] ^= 0x10
    with pytest.raises(ProtocolError):
        decode_frame(bytes(frame))
    with pytest.raises(ProtocolError, match="too short"):
        decode_frame(cobs_encode(b"\x01\x04"))


def test_invalid_messages_are_refused():
    with pytest.raises(ProtocolError, match="unknown sample format"):
        encode_frame(Hello("x", "1", 1, 10.0, "int12"), 0)
    with pytest.raises(ProtocolError, match="int8, int16 or float32"):
        encode_frame(Samples(0, np.zeros((2, 2), dtype=np.float64)), 0)
    with pytest.raises(ProtocolError, match="exceeds"):
        encode_frame(Samples(0, np.zeros((3000, 2), dtype=np.int8)), 0)


def test_crc_and_framing_damage_are_counted_apart():
    decoder = StreamDecoder()
    flipped = bytearray(encode_frame(Ping(1), 0))
    flipped[6] ^= 0x01  # inside the payload: COBS still decodes, the CRC does not match
    cut = encode_frame(Ping(2), 1)[:5] + b"\x00"  # a COBS block that runs past the frame's end
    assert decoder.feed(bytes(flipped) + cut + encode_frame(Ping(3), 2)) == [(2, Ping(3))]
    assert (decoder.stats.bad_crc, decoder.stats.bad_frames) == (1, 1)


def test_a_hello_without_capabilities_is_byte_for_byte_the_version_1_hello():
    plain = Hello("emg1", "1.0", 8, 200.0, "int8")
    # PROTOCOL.md's example, from before the capability byte: a front-end flashed before it still says the same.
    assert encode_frame(plain, 0).hex(" ") == ("03 01 01 01 02 0f 0e 04 65 6d 67 31 03 31 2e 30 08 40 0d 03 06 01 48 "
                                               "57 a1 a6 00")
    assert not plain.answers_tests
    able = decode_frame(encode_frame(Hello("emg1", "1.0", 8, 200.0, "int8", CAN_TEST), 0)[:-1])[1]
    assert isinstance(able, Hello) and able.answers_tests and able.capabilities == CAN_TEST


def test_a_newer_hello_with_more_after_the_capability_byte_is_still_read():
    from firmware_bridge.protocol import decode_payload, encode_payload

    kind, payload = encode_payload(Hello("emg1", "1.0", 8, 200.0, "int8", CAN_TEST))
    read = decode_payload(kind, payload + b"\x07\x08")  # fields a later version adds: ignored, not refused
    assert isinstance(read, Hello) and read.answers_tests and read.channels == 8


def test_a_capability_past_a_byte_is_refused_on_encoding():
    with pytest.raises(ProtocolError, match="capabilities"):
        encode_frame(Hello("emg1", "1.0", 8, 200.0, "int8", 256), 0)
