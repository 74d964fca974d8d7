"""The on-disk format of a recorded session (pure functions, no I/O).

A session is a folder:

    manifest.json   device HELLO, sample rate, channels, sample format, user, labels, software
                    (written atomically; rewritten atomically when it changes)
    samples.bin     append-only chunks of interleaved samples, each with its own CRC-32
    windows.jsonl   append-only, one accepted labelled window per line:
                    {"label": "A", "start": <first sample index>, "length": <samples>, ...}

A chunk is a 28-byte little-endian header followed by its payload:

    magic  b"TNSC"       4 bytes
    version              u16 (2; 1 in sessions recorded before device resets were detected)
    channels             u16
    sample format code   u8  (1 int8, 2 int16, 3 float32)
    reserved             1 byte (0)
    epoch                u16 (0, then +1 each time the device restarted; 0 in version 1)
    first sample index   u64 (index of the chunk's first sample on the session's timeline; gaps allowed)
    samples              u32 (per channel)
    payload CRC-32       u32 (zlib.crc32 of the payload)
    payload              samples * channels * itemsize bytes, sample-major (interleaved)

Version 2 (the manifest's "version" too): indices are on a forward-only timeline
(`firmware_bridge/timeline.py`), so a device restart can never give new samples the indices of recorded
ones, and a window record carries the CRC-32 of its samples as accepted ("crc32", of the float32
little-endian values), which the reader checks. Version 1 chunks and sessions still read.

A recorder killed mid-write leaves at most a torn last chunk: the reader keeps every complete
chunk and reports how many bytes at the tail were lost. A corrupt chunk is skipped by scanning
for the next magic.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from firmware_bridge.errors import BridgeError
from firmware_bridge.protocol import FORMAT_BY_CODE, FORMAT_CODES

MAGIC = b"TNSC"
VERSION = 2
READABLE_VERSIONS = (1, 2)
HEADER = struct.Struct("<4sHHBxHQII")
FORMAT_NAME = "tinynas-session"
MAX_SAMPLES_BYTES = 4 << 30
"""The largest samples.bin read back whole (a day at 12 kHz x 1 channel of int16 is ~2 GiB): a bigger file is not
a session this machine can hold in memory."""


class SessionFormatError(BridgeError, ValueError):
    """Bytes that are not a valid chunk."""


def window_crc(samples: np.ndarray) -> int:
    """The CRC-32 a window record carries: of its samples as float32, little endian (what the reader gets)."""
    return zlib.crc32(np.ascontiguousarray(samples, dtype="<f4").tobytes())


def encode_chunk(first_sample: int, samples: np.ndarray, sample_format: str, epoch: int = 0) -> bytes:
    """Header + payload for `samples` (n, channels) starting at session sample `first_sample`."""
    if sample_format not in FORMAT_CODES:
        raise SessionFormatError(f"unknown sample format {sample_format!r}; choose {', '.join(FORMAT_CODES)}")
    code = FORMAT_CODES[sample_format]
    dtype = FORMAT_BY_CODE[code][1]
    samples = np.asarray(samples)
    if samples.ndim != 2 or samples.shape[1] < 1:
        raise SessionFormatError(f"samples must have shape (n, channels), got {samples.shape}")
    payload = np.ascontiguousarray(samples.astype(dtype, copy=False)).tobytes()
    header = HEADER.pack(MAGIC, VERSION, samples.shape[1], code, epoch & 0xFFFF, first_sample, samples.shape[0],
                         zlib.crc32(payload))
    return header + payload


@dataclass(frozen=True)
class Chunk:
    """One decoded chunk."""

    first_sample: int
    samples: np.ndarray  # (n, channels)
    sample_format: str
    version: int = VERSION
    epoch: int = 0


@dataclass(frozen=True)
class ScanResult:
    """Every valid chunk of a samples.bin, and what could not be read."""

    chunks: list[Chunk]
    corrupt_chunks: int
    lost_tail_bytes: int


def scan(data: bytes) -> ScanResult:
    """Decode every valid chunk; skip corrupt ones (resync on the next magic); measure a torn tail."""
    chunks: list[Chunk] = []
    corrupt = 0
    position = 0
    while position < len(data):
        if data[position:position + 4] == MAGIC and len(data) - position >= HEADER.size:
            _, version, channels, code, epoch, first, count, crc = HEADER.unpack_from(data, position)
            if version in READABLE_VERSIONS and code in FORMAT_BY_CODE and channels >= 1:
                name, dtype = FORMAT_BY_CODE[code]
                end = position + HEADER.size + count * channels * dtype.itemsize
                if end > len(data):
                    return ScanResult(chunks, corrupt, len(data) - position)  # torn last chunk
                payload = data[position + HEADER.size:end]
                if zlib.crc32(payload) == crc:
                    chunks.append(Chunk(first, np.frombuffer(payload, dtype=dtype).reshape(count, channels), name,
                                        version, epoch))
                    position = end
                    continue
        elif data[position:position + 4] == MAGIC or MAGIC.startswith(data[position:]):
            return ScanResult(chunks, corrupt, len(data) - position)  # torn header
        corrupt += 1
        found = data.find(MAGIC, position + 1)
        if found < 0:
            return ScanResult(chunks, corrupt, 0)
        position = found
    return ScanResult(chunks, corrupt, 0)
