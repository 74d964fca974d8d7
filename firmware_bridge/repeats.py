"""Noticing a recording that repeats itself, while it is recorded: a short file played in a loop is not a machine.

A scorer learns normal running from a machine's recording; a test rig, a demo or a replayed file that loops a few
seconds gives it the same samples again and again, and its threshold is then set on windows it has already seen
(`tinynas.anomaly.task` drops such copies after the fact: then the whole recording was wasted). A real sensor never
repeats itself sample for sample (its noise alone differs), so an exact repeat is said at the segment it happens.

How: every CHUNK consecutive samples of what was kept are hashed at aligned positions (random weights, integer
arithmetic modulo 2^64: equal samples, equal hash); a new segment's chunks are hashed at every offset, and the share
of its samples inside a chunk seen before is its repeated share. A copied stretch of 2 x CHUNK samples or more
always holds an aligned chunk of the original. Flat chunks (a constant value) are left out: a flat channel is said
by the window checks, not as a loop.
"""

from __future__ import annotations

import numpy as np

CHUNK = 64
"""Samples per hashed chunk: long enough that real noise never matches, short enough to find a loop of a second."""
REPEATED = 0.5
"""A segment whose share of samples seen before reaches this repeats the recording (real noise matches no chunk at
all; a copy covers all but the few samples past the last aligned chunk of what it copies)."""


class RepeatWatch:
    """The kept segments' aligned chunk hashes, and a new segment's share of samples found among them."""

    def __init__(self, seed: int = 0x5EED) -> None:
        self._seen: set[int] = set()
        self._weights: np.ndarray | None = None
        self._seed = seed

    def _bits(self, window: np.ndarray) -> np.ndarray:
        values = np.asarray(window)
        values = values.reshape(len(values), -1)
        if self._weights is None or self._weights.shape[1] != values.shape[1]:
            rng = np.random.default_rng(self._seed)
            self._weights = rng.integers(1, np.iinfo(np.int64).max, size=(CHUNK, values.shape[1]),
                                         dtype=np.int64).view(np.uint64)
        bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)  # exact: equal samples, equal bits
        # splitmix64's finaliser: a float's bit pattern has long runs of zeros, which a weighted sum alone keeps.
        with np.errstate(over="ignore"):
            bits = (bits ^ (bits >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            bits = (bits ^ (bits >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            return bits ^ (bits >> np.uint64(31))

    def _hashes(self, bits: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
        """(hash, not flat) of every CHUNK-sample chunk starting at 0, step, 2*step, ..."""
        assert self._weights is not None
        if len(bits) < CHUNK:
            return np.zeros(0, np.uint64), np.zeros(0, bool)
        windows = np.lib.stride_tricks.sliding_window_view(bits, CHUNK, axis=0)[::step]  # (n, C, CHUNK)
        with np.errstate(over="ignore"):
            hashes = np.einsum("nck,kc->n", windows, self._weights, dtype=np.uint64)
        varied = (windows != windows[:, :, :1]).any(axis=(1, 2))
        return hashes, varied

    def repeated_share(self, window: np.ndarray) -> float:
        """The share of `window`'s samples (time-major, samples x channels) inside a chunk kept before."""
        if not self._seen or len(window) < CHUNK:
            return 0.0
        hashes, varied = self._hashes(self._bits(window), 1)
        found = np.flatnonzero(varied & np.isin(hashes, np.fromiter(self._seen, np.uint64, len(self._seen))))
        if not len(found):
            return 0.0
        starts = np.zeros(len(window), np.int64)
        starts[found] = 1
        covered = np.convolve(starts, np.ones(CHUNK, np.int64))[:len(window)] > 0  # a found chunk covers CHUNK samples
        return float(covered.mean())

    def remember(self, window: np.ndarray) -> None:
        """Keep `window`'s aligned chunks (a segment that was kept)."""
        hashes, varied = self._hashes(self._bits(window), CHUNK)
        self._seen.update(int(value) for value in hashes[varied])
