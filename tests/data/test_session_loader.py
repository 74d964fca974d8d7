import json

import numpy as np
import pytest

from firmware_bridge.session_format import FORMAT_NAME, encode_chunk
from tinynas.data.session import load_session
from tinynas.data.windows import DataError


def _session(folder, chunks, windows, labels=("rest", "fist"), channels=2):
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({
        "format": FORMAT_NAME, "version": 1, "sample_rate_hz": 200.0, "channels": channels,
        "channel_names": [f"emg{i}" for i in range(channels)], "sample_format": "int16", "labels": list(labels)}))
    with open(folder / "samples.bin", "wb") as out:
        for first, block in chunks:
            out.write(encode_chunk(first, block, "int16"))
    with open(folder / "windows.jsonl", "w") as out:
        for label, start, length in windows:
            out.write(json.dumps({"label": label, "start": start, "length": length}) + "\n")
    return folder


def test_session_windows_come_back_bit_for_bit(tmp_path):
    stream = np.arange(600 * 2, dtype=np.int16).reshape(600, 2)
    folder = _session(tmp_path / "s1", [(0, stream[:250]), (250, stream[250:])],
                      [("rest", 0, 100), ("fist", 200, 100), ("rest", 400, 100)])
    windows = load_session(folder)
    assert windows.x.shape == (3, 100, 2) and windows.class_names == ("rest", "fist")
    assert np.array_equal(windows.x[1], stream[200:300].astype(np.float32))
    assert windows.y.tolist() == [0, 1, 0] and windows.time_index.tolist() == [0, 200, 400]


def test_torn_tail_keeps_complete_chunks(tmp_path, caplog):
    stream = np.ones((400, 2), dtype=np.int16)
    folder = _session(tmp_path / "s1", [(0, stream[:200]), (200, stream[200:])],
                      [("rest", 0, 100), ("fist", 100, 100), ("fist", 250, 100)])
    data = (folder / "samples.bin").read_bytes()
    (folder / "samples.bin").write_bytes(data[:-50])  # killed mid-write of the second chunk
    windows = load_session(folder)
    assert windows.time_index.tolist() == [0, 100]
    assert "torn chunk" in caplog.text and "never received" in caplog.text


def test_gap_in_the_stream_skips_windows_inside_it(tmp_path):
    stream = np.ones((600, 2), dtype=np.int16)
    folder = _session(tmp_path / "s1", [(0, stream[:200]), (400, stream[400:])],
                      [("rest", 0, 100), ("fist", 250, 100), ("fist", 450, 100)])
    windows = load_session(folder)
    assert windows.time_index.tolist() == [0, 450]
    assert windows.provenance["skipped_windows"] == 1


def test_folder_of_sessions(tmp_path):
    stream = np.ones((300, 2), dtype=np.int16)
    for name in ("day1", "day2"):
        _session(tmp_path / name, [(0, stream)], [("rest", 0, 100), ("fist", 150, 100)])
    windows = load_session(tmp_path)
    assert len(windows) == 4 and sorted(set(windows.sessions)) == ["day1", "day2"]


def test_not_a_session(tmp_path):
    with pytest.raises(DataError, match="holds no recorded session"):
        load_session(tmp_path)
