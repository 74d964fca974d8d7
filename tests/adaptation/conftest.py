"""A real search's model folder on small synthetic sEMG, made once for the adaptation tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def model_dir(built_once):
    """A finished `fast` search on small synthetic sEMG (tests/support/searched.py: "adaptation"); the tests read
    the model folder, not how it was found."""
    from tests.support.searched import finished

    return finished("adaptation", built_once)


def pytest_collection_modifyitems(items):
    # Every test of the search's model folder runs in the slow tier (a real search: minutes on 2 cores), with the
    # other tests that need one; the rest of this folder stays in the fast tier.
    for item in items:
        if "model_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
