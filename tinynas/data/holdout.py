"""A separate data set (another day, another person) as the test side of a search."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tinynas.data.splits import Split


def without_test_side(split: Split, test_windows: int) -> Split:
    """`split` with its test side moved into training: the test windows come from elsewhere.

    The test side shares no recording group with validation, so training on it leaks nothing.
    Where validation is a held-out session, that session's test side validates instead: training
    on it would make the held-out session seen.
    """
    empty = np.array([], dtype=split.train.dtype)
    if split.held_out:
        val = np.sort(np.concatenate([split.val, split.test])).astype(split.val.dtype)
        protocol = (f"{split.protocol}; that test side validates too: the test set is a separate data set "
                    f"({test_windows} windows)")
        return replace(split, val=val, test=empty, protocol=protocol)
    train = np.sort(np.concatenate([split.train, split.test])).astype(split.train.dtype)
    protocol = (f"{split.protocol}; that test side trains too: the test set is a separate data set "
                f"({test_windows} windows)")
    return replace(split, train=train, test=empty, protocol=protocol)
