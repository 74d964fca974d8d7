"""Fixtures for the strategy tests."""

import pytest

from tinynas.search.base import SearchSpace


@pytest.fixture
def space():
    """A small space: 64 samples (6 cells at most), k up to 64."""
    return SearchSpace(input_length=64, input_channels=2, classes=4, max_k=64)
