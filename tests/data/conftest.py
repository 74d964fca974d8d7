"""Data fixtures: the real public sets when ../shared/data is there, small generated copies always."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.data_files import write_isl_recording

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="session")
def real_isl():
    path = SHARED / "isl"
    if not (path / "Dataset").is_dir():
        pytest.skip("../shared/data/isl is not here")
    return path


@pytest.fixture(scope="session")
def real_cwru():
    path = SHARED / "cwru"
    if not (path / "105.mat").exists():
        pytest.skip("../shared/data/cwru is not here")
    return path


@pytest.fixture(scope="session")
def real_cwru_1hp():
    path = SHARED / "cwru_1hp_dev"
    if not (path / "106.mat").exists():
        pytest.skip("../shared/data/cwru_1hp_dev is not here")
    return path


@pytest.fixture(scope="session")
def real_isl_session3():
    path = SHARED / "isl_session3_dev"
    if not (path / "Dataset").is_dir():
        pytest.skip("../shared/data/isl_session3_dev is not here")
    return path


@pytest.fixture
def small_isl(tmp_path):
    """3 letters x 5 recordings in the published layout."""
    rng = np.random.default_rng(0)
    for letter_index, letter in enumerate("ABC"):
        for rep in range(5):
            emg = rng.integers(-128, 128, size=(400, 8))
            write_isl_recording(tmp_path / "Dataset" / letter / f"{letter}{rep:02d}-guid.json", emg,
                                f"2{6 + letter_index // 2}/06/20/12:{letter_index:02d}:{rep * 10:02d}")
    return tmp_path


@pytest.fixture
def small_cwru(tmp_path):
    """Three .mat files with the Data Center's key layout, one with a prefix unlike its number."""
    from scipy.io import savemat

    rng = np.random.default_rng(1)
    savemat(tmp_path / "97.mat", {"X097_DE_time": rng.normal(size=(48_000, 1)),
                                  "X097_FE_time": rng.normal(size=(48_000, 1)), "X097RPM": np.array([[1796]])})
    savemat(tmp_path / "105.mat", {"X105_DE_time": rng.normal(size=(12_000, 1)),
                                   "X105_FE_time": rng.normal(size=(12_000, 1)), "X105RPM": np.array([[1797]])})
    savemat(tmp_path / "3001.mat", {"X056_DE_time": rng.normal(size=(12_000, 1))})
    return tmp_path


@pytest.fixture
def small_cwru_1hp(tmp_path):
    """Three 1 hp files (no normal baseline, as in cwru_1hp_dev): one with its RPM key, one without,
    one with a prefix unlike its number (3002 holds X057)."""
    from scipy.io import savemat

    rng = np.random.default_rng(2)
    folder = tmp_path / "cwru_1hp"
    folder.mkdir()
    savemat(folder / "106.mat", {"X106_DE_time": rng.normal(size=(12_000, 1)),
                                 "X106_FE_time": rng.normal(size=(12_000, 1)), "X106RPM": np.array([[1774]])})
    savemat(folder / "119.mat", {"X119_DE_time": rng.normal(size=(12_000, 1))})
    savemat(folder / "3002.mat", {"X057_DE_time": rng.normal(size=(12_000, 1))})
    return folder
