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


def _cyton(port_dir, stream):
    from firmware_bridge import cyton_wire
    from firmware_bridge.protocol import Hello
    from firmware_bridge.simulator import ArraySource, Simulator

    hello = Hello("sim-cyton", "1.0", cyton_wire.CHANNELS, cyton_wire.RATE_HZ, "float32")
    return Simulator(ArraySource(stream), hello, port_dir=port_dir, wire="cyton")


def test_a_cyton_on_a_serial_port_is_read_by_brainflows_own_driver_value_for_value(tmp_path):
    """tinynas's simulated Cyton on a pseudo-terminal (firmware_bridge.cyton_wire: the board's commands and 33-byte
    packets) read by BrainFlow's Cyton driver: BrainFlow's microvolts are the samples sent, in order."""
    from firmware_bridge import cyton_wire

    stream = np.round(np.random.default_rng(0).normal(0, 40, size=(5000, 8)), 3)
    with _cyton(tmp_path, stream) as cyton, open_link(f"brainflow:cyton?serial_port={cyton.port}").open() as link:
        hello = link.wait_hello(10 * slowdown())
        assert (hello.channels, hello.sample_rate_hz) == (8, 250.0)
        played = _samples(link, 500)
    microvolts = 4.5 / (2 ** 23 - 1) / 24 * 1e6 * cyton_wire.COUNTS_PER_UNIT
    sent = np.round(stream * cyton_wire.COUNTS_PER_UNIT) / cyton_wire.COUNTS_PER_UNIT
    start = int(np.argmin(np.abs(sent[:, 0] * microvolts - played[0, 0])))
    assert np.allclose(played, sent[start:start + len(played)] * microvolts, rtol=1e-5, atol=1e-3)
    assert link.counters.lost_samples == 0


def test_a_cyton_unplugged_and_back_is_prepared_again_and_a_new_epoch(tmp_path):
    """The dongle pulled for a second: BrainFlow's driver says nothing (its serial read retries for ever); the link
    hears nothing for SILENT_SECONDS, prepares the board again once it is back, and what it sends is a new epoch."""
    from firmware_bridge.link import DeviceReset

    stream = np.random.default_rng(1).normal(0, 40, size=(250 * 60, 8))
    with _cyton(tmp_path, stream) as cyton, open_link(f"brainflow:cyton?serial_port={cyton.port}").open() as link:
        link.wait_hello(10 * slowdown())
        _samples(link, 250)
        cyton.unplug(1.0)
        deadline, reset = time.monotonic() + 30 * slowdown(), None
        while reset is None:
            assert time.monotonic() < deadline, "the board was not prepared again"
            message = link.get(0.1)
            reset = message if isinstance(message, DeviceReset) else None
        assert link.counters.reconnects == 1 and len(_samples(link, 250)) >= 250


def test_a_brainflow_whose_library_is_for_another_machine_is_one_line(tmp_path):
    """What a Raspberry Pi meets (PyPI's BrainFlow carries x86_64 Linux libraries only): BrainFlow with a library
    the loader refuses (here the wheel's own 32-bit ARM library in its place) is one line that says what to do."""
    import shutil

    import brainflow

    from tests.support.elsewhere import open_with_changed_package

    def foreign_library(copy):
        foreign = copy / "lib" / "libunicorn_raspberry.so"
        assert foreign.exists(), "the wheel no longer carries its 32-bit ARM library: pick another foreign ELF"
        shutil.copy(foreign, copy / "lib" / "libBoardController.so")

    lines = open_with_changed_package(tmp_path, brainflow, foreign_library, "brainflow:synthetic")
    assert len(lines) == 1 and "BrainFlow's library does not load" in lines[0], lines
    assert "build BrainFlow from source" in lines[0]
