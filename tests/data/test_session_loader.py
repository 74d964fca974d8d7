import json

import numpy as np
import pytest

from firmware_bridge.session_format import FORMAT_NAME, encode_chunk
from tinynas.data.session import load_session
from tinynas.data.spec import load_windows
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


def _recorded(folder, recordings, rate=12_000.0):
    """A session written by the real recorder: each (label, samples) is one accepted recording."""
    from firmware_bridge.protocol import Hello, Samples
    from firmware_bridge.recorder import Recorder

    hello = Hello("sim", "1", 1, rate, "int16")
    position = 0
    with Recorder(folder, hello, labels=sorted({label for label, _ in recordings})) as recorder:
        for label, samples in recordings:
            position += 100  # idle samples between prompts, never part of a recording
            block = np.asarray(samples, dtype=np.int16).reshape(-1, 1)
            recorder.add_samples(Samples(position - 100, np.zeros((100, 1), np.int16)))
            recorder.add_samples(Samples(position, block))
            recorder.add_window(label, position, len(block))
            position += len(block)
    return folder


def test_session_recut_into_target_sized_windows(tmp_path):
    rng = np.random.default_rng(0)
    recordings = [(label, rng.integers(-1000, 1000, size=1000)) for label in ("normal", "fault") * 2]
    folder = _recorded(tmp_path / "s", recordings)
    whole = load_session(folder)
    assert whole.x.shape == (4, 1000, 1)
    cut = load_windows(f"session:{folder}?window=256&hop=128")
    # (1000 - 256) // 128 + 1 = 6 windows per recording, each inside its recording, with its group.
    assert cut.x.shape == (24, 256, 1) and cut.provenance["window"] == 256 and cut.provenance["hop"] == 128
    for group, start in zip(whole.groups, whole.time_index):
        mine = cut.groups == group
        assert mine.sum() == 6 and len(set(cut.y[mine])) == 1
        firsts = cut.time_index[mine]
        assert firsts.min() >= start and firsts.max() + 256 <= start + 1000
        source = whole.x[whole.groups == group][0]
        for window, first in zip(cut.x[mine], firsts):
            assert np.array_equal(window, source[first - start:first - start + 256])
    assert len(load_windows(f"session:{folder}?window=256")) == 4 * 3


def test_session_recut_refuses_windows_longer_than_every_recording(tmp_path):
    folder = _recorded(tmp_path / "s", [("a", np.ones(300)), ("b", np.ones(300))])
    with pytest.raises(DataError, match=r"every recording is shorter than window=512 \(recorded lengths: 300\)"):
        load_session(folder, window=512)


def test_session_recut_skips_only_windows_in_a_gap(tmp_path):
    stream = np.arange(1000 * 2, dtype=np.int16).reshape(1000, 2)
    folder = _session(tmp_path / "s1", [(0, stream[:500]), (600, stream[600:])],
                      [("rest", 0, 400), ("fist", 400, 600)])
    windows = load_session(folder, window=100)
    # rest: 4 windows; fist 400..1000: only 400..500 and 600..1000 were received (1 + 4 windows).
    assert windows.time_index.tolist() == [0, 100, 200, 300, 400, 600, 700, 800, 900]
    assert windows.provenance["skipped_windows"] == 1


def test_windows_of_mixed_lengths_point_at_recut(tmp_path):
    stream = np.ones((600, 2), dtype=np.int16)
    folder = _session(tmp_path / "s1", [(0, stream)], [("rest", 0, 100), ("fist", 200, 300)])
    with pytest.raises(DataError, match=r"windows of different lengths \[100, 300\]; .*\?window=100"):
        load_session(folder)


def test_a_chunk_header_claiming_a_huge_index_allocates_nothing_for_it(tmp_path):
    from firmware_bridge.session_format import HEADER

    stream = np.ones((300, 2), dtype=np.int16)
    folder = _session(tmp_path / "s1", [(0, stream[:200]), (200, stream[200:])],
                      [("rest", 0, 100), ("fist", 100, 100)])
    data = bytearray((folder / "samples.bin").read_bytes())
    second = HEADER.size + 200 * 2 * 2
    data[second + 12:second + 20] = (2 ** 62).to_bytes(8, "little")  # first sample index (outside the CRC)
    (folder / "samples.bin").write_bytes(bytes(data))
    assert load_session(folder).time_index.tolist() == [0, 100]


@pytest.mark.parametrize("manifest, message", [
    ([1, 2], "not a tinynas-session manifest"),
    ({"format": FORMAT_NAME, "sample_rate_hz": 200.0, "channels": "two"}, "channels is 'two'"),
    ({"format": FORMAT_NAME, "sample_rate_hz": 0, "channels": 2}, "sample_rate_hz is 0"),
    ({"format": FORMAT_NAME, "sample_rate_hz": 200.0, "channels": 2, "labels": "rest"}, "labels is not a list"),
])
def test_damaged_manifests_are_one_line(tmp_path, manifest, message):
    folder = _session(tmp_path / "s1", [(0, np.ones((300, 2), np.int16))], [("rest", 0, 100)])
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=message):
        load_session(folder)


def test_a_damaged_window_record_is_one_line(tmp_path):
    folder = _session(tmp_path / "s1", [(0, np.ones((300, 2), np.int16))], [("rest", 0, 100), ("fist", 100, 100)])
    (folder / "windows.jsonl").write_text('{"label": "rest", "start": "zero", "length": 100}\n'
                                          '{"label": "fist", "start": 100, "length": 100}\n')
    with pytest.raises(DataError, match="windows.jsonl: line 1 is not a window record"):
        load_session(folder)


def _as_version_1(chunk: bytes) -> bytes:
    """A chunk as sessions recorded before device resets were detected wrote it (version 1, no epoch)."""
    return chunk[:4] + (1).to_bytes(2, "little") + chunk[6:]


def test_a_version_1_session_still_reads_later_chunks_winning(tmp_path):
    folder = _session(tmp_path / "s1", [], [("rest", 0, 100), ("fist", 100, 100)])
    first, again = np.ones((200, 2), np.int16), np.full((100, 2), 7, np.int16)
    (folder / "samples.bin").write_bytes(_as_version_1(encode_chunk(0, first, "int16"))
                                         + _as_version_1(encode_chunk(100, again, "int16")))
    windows = load_session(folder)
    assert windows.x[0].tolist() == first[:100].tolist() and windows.x[1].tolist() == again.tolist()


def test_version_2_never_lets_a_later_chunk_replace_an_earlier_one(tmp_path):
    first, again = np.ones((200, 2), np.int16), np.full((100, 2), 7, np.int16)
    folder = _session(tmp_path / "s1", [(0, first), (100, again)], [("rest", 0, 100), ("fist", 100, 100)])
    assert load_session(folder).x[1].tolist() == first[100:].tolist()


def test_a_window_whose_samples_changed_since_it_was_accepted_is_left_out(tmp_path, caplog):
    from firmware_bridge.session_format import window_crc

    stream = np.arange(600 * 2, dtype=np.int16).reshape(600, 2)
    folder = _session(tmp_path / "s1", [(0, stream)], [])
    records = [{"label": "rest", "start": 0, "length": 100, "crc32": window_crc(stream[:100])},
               {"label": "fist", "start": 200, "length": 100, "crc32": window_crc(stream[200:300]) ^ 1},
               {"label": "fist", "start": 400, "length": 100, "crc32": window_crc(stream[400:500])}]
    (folder / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    windows = load_session(folder)
    assert windows.time_index.tolist() == [0, 400] and windows.provenance["changed_windows"] == 1
    assert "do not hold the samples that were accepted" in caplog.text
