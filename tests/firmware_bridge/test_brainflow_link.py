"""A biosignal board through BrainFlow, as a front-end: BrainFlow's own synthetic board and its playback board (a
recording played back), no hardware. The channels and rate come from BrainFlow's description of the board, the
samples land on the timeline, a playback comes back value for value, and a board that cannot be opened is one
line."""

import time

import numpy as np
import pytest
from brainflow import board_shim  # a test extra: CI installs it, so these never skip

from devtools.machine_speed import slowdown
from firmware_bridge.link import LinkError
from firmware_bridge.protocol import Samples
from firmware_bridge.text_link import open_link


def _samples(link, count: int) -> np.ndarray:
    got, deadline = [], time.monotonic() + 30 * slowdown()
    while sum(len(m.data) for m in got) < count:
        assert time.monotonic() < deadline, "timed out"
        message = link.get(0.1)
        if isinstance(message, Samples):
            got.append(message)
    indices = np.concatenate([m.first_sample + np.arange(len(m.data)) for m in got])
    assert np.all(np.diff(indices) > 0)  # forward only, as frames
    return np.concatenate([m.data for m in got])


def test_the_synthetic_board_streams_its_emg_channels_at_its_rate():
    BoardIds, BoardShim = board_shim.BoardIds, board_shim.BoardShim
    board = BoardIds.SYNTHETIC_BOARD.value
    with open_link("brainflow:synthetic").open() as link:
        hello = link.wait_hello(5)
        assert hello.channels == len(BoardShim.get_emg_channels(board))
        assert hello.sample_rate_hz == BoardShim.get_sampling_rate(board)
        started = time.monotonic()
        data = _samples(link, int(hello.sample_rate_hz))  # one second of signal
        assert time.monotonic() - started < 10 * slowdown()
        assert data.shape[1] == hello.channels and np.all(np.isfinite(data)) and data.std() > 0
        assert link.counters.lost_samples == 0


def test_a_recording_played_back_by_brainflow_comes_back_value_for_value(tmp_path):
    BoardIds, BoardShim = board_shim.BoardIds, board_shim.BoardShim
    from brainflow.data_filter import DataFilter

    board = BoardIds.SYNTHETIC_BOARD.value
    shim = BoardShim(board, board_shim.BrainFlowInputParams())
    shim.prepare_session()
    shim.start_stream()
    time.sleep(2.0)
    recorded = shim.get_board_data()
    shim.stop_stream()
    shim.release_session()
    path = tmp_path / "recording.csv"
    DataFilter.write_file(recorded, str(path), "w")
    emg = recorded[BoardShim.get_emg_channels(board)].T.astype(np.float32)
    url = f"brainflow:playback_file?file={path}&master_board={board}"
    with open_link(url).open() as link:
        assert link.wait_hello(5).channels == emg.shape[1]
        played = _samples(link, 200)
    start = int(np.argmin(np.abs(emg[:, 0] - played[0, 0]) + np.abs(emg[:, 1] - played[0, 1])))
    assert np.allclose(played[:100], emg[start:start + 100], rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize(("url", "why"), [
    ("brainflow:no_such_board", "BrainFlow knows no board 'no_such_board'"),
    ("brainflow:synthetic?speed=2", "unknown option 'speed'"),
    ("brainflow:cyton?serial_port=/dev/tinynas-no-such-port", "cannot open brainflow:cyton"),
])
def test_a_board_that_cannot_be_opened_is_one_line(url, why):
    with pytest.raises(LinkError, match=why) as caught:
        open_link(url).open()
    assert "\n" not in str(caught.value)
