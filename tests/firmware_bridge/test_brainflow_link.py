"""A biosignal board through BrainFlow, as a front-end: BrainFlow's own synthetic board and its playback board (a
recording played back), no hardware. The channels and rate come from BrainFlow's description of the board, the
samples land on the timeline, a playback comes back value for value, and a board that cannot be opened is one
line."""

import time

import numpy as np
import pytest
from brainflow import board_shim  # a test extra: CI installs it, so these never skip

from devtools.machine_speed import slowdown
from firmware_bridge.link import LinkError, link_for_url
from firmware_bridge.protocol import Samples


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
    with link_for_url("brainflow:synthetic").open() as link:
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
    with link_for_url(url).open() as link:
        assert link.wait_hello(5).channels == emg.shape[1]
        played = _samples(link, 200)
    start = int(np.argmin(np.abs(emg[:, 0] - played[0, 0]) + np.abs(emg[:, 1] - played[0, 1])))
    assert np.allclose(played[:100], emg[start:start + 100], rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize(("url", "why"), [
    ("brainflow:no_such_board", "BrainFlow knows no board 'no_such_board' (its names, any case, with or without "
                                "_board: synthetic, cyton, cyton_daisy, ganglion, gforce_pro"),
    ("brainflow:no_board", "BrainFlow knows no board 'no_board'"),
    ("brainflow:synthetic?speed=2", "unknown option 'speed'"),
    ("brainflow:cyton?serial_port=/dev/tinynas-no-such-port",
     "there is no serial port /dev/tinynas-no-such-port (is the board's dongle or cable plugged in?"),
    ("brainflow:cyton?serial_port=/etc/hostname", "/etc/hostname is not a serial port"),
    ("brainflow:cyton", "say how to reach it, e.g. ?serial_port=/dev/ttyUSB0"),
    ("brainflow:synthetic?timeout=-1", "timeout must be an integer from 0 to 600 (seconds), got '-1'"),
    ("brainflow:synthetic?ip_port=65536", "ip_port must be an integer from 0 to 65535, got '65536'"),
    ("brainflow:synthetic?ip_port=nan", "ip_port must be an integer from 0 to 65535, got 'nan'"),
    ("brainflow:playback_file?file=/tmp/x.csv", "say which, e.g. &master_board=synthetic"),
    ("brainflow:playback_file?file=/tmp/x.csv&master_board=999", "BrainFlow knows no master_board '999'"),
    ("brainflow:playback_file?file=/tmp/tinynas-no-such-recording.csv&master_board=synthetic",
     "file /tmp/tinynas-no-such-recording.csv: No such file"),
])
def test_a_board_that_cannot_be_opened_is_one_line(url, why):
    with pytest.raises(LinkError) as caught:
        link_for_url(url).open()
    assert why in str(caught.value) and "\n" not in str(caught.value)
    assert "_ERROR:" not in str(caught.value)  # BrainFlow's bare codes are said in words


@pytest.mark.parametrize("name", ["synthetic", "synthetic_board", "SYNTHETIC_BOARD", "Synthetic", "-1"])
def test_brainflows_own_board_names_are_taken_in_any_case(name):
    """The service names its device `brainflow:synthetic_board`: that name, BoardIds' own spelling and its number are
    the board, as the short name is."""
    with link_for_url(f"brainflow:{name}").open() as link:
        assert link.wait_hello(5).device_id == "brainflow:synthetic_board"


def test_a_board_name_as_brainflow_spells_it_reaches_the_board(tmp_path):
    """`cyton_board` and `CYTON_BOARD` are the Cyton (they were refused): read on tinynas's simulated Cyton."""
    stream = np.random.default_rng(2).normal(0, 40, size=(250 * 30, 8))
    with _cyton(tmp_path, stream) as cyton, \
            link_for_url(f"brainflow:CYTON_BOARD?serial_port={cyton.port}").open() as link:
        assert (link.wait_hello(10 * slowdown()).channels, link.hello.sample_rate_hz) == (8, 250.0)
        assert len(_samples(link, 250)) >= 250


def test_nan_in_what_a_board_sends_is_refused_never_passed_on(tmp_path):
    """A recording with NaN and a value past float32 in its EMG rows, played back by BrainFlow's own playback board:
    those samples are counted (bad_values) and leave a gap; every sample passed on is a finite float32."""
    BoardIds, BoardShim = board_shim.BoardIds, board_shim.BoardShim
    from brainflow.data_filter import DataFilter

    board = BoardIds.SYNTHETIC_BOARD.value
    rows = BoardShim.get_num_rows(board)
    emg = BoardShim.get_emg_channels(board)
    count = 2000
    data = np.zeros((rows, count))
    data[BoardShim.get_package_num_channel(board)] = np.arange(count) % 256
    data[BoardShim.get_timestamp_channel(board)] = 1e9 + np.arange(count) / 250.0
    data[emg] = np.sin(np.arange(count) / 7.0) * 50
    data[emg[0], 100::200] = np.nan
    data[emg[1], 150::200] = 1e39
    path = tmp_path / "damaged.csv"
    DataFilter.write_file(data, str(path), "w")
    with link_for_url(f"brainflow:playback_file?file={path}&master_board=synthetic").open() as link:
        link.wait_hello(5)
        played = _samples(link, 600)
        assert link.counters.bad_values >= 4 and link.counters.lost_samples >= 4
    assert np.all(np.isfinite(played)) and np.abs(played).max() <= 50


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
    with _cyton(tmp_path, stream) as cyton, link_for_url(f"brainflow:cyton?serial_port={cyton.port}").open() as link:
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
    with _cyton(tmp_path, stream) as cyton, link_for_url(f"brainflow:cyton?serial_port={cyton.port}").open() as link:
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


@pytest.mark.slow
def test_windows_are_collected_from_brainflows_own_synthetic_board_by_its_own_name(tmp_path):
    """`brainflow:synthetic_board` (the name the service shows for it, refused before) through a machine plan's
    collection: BrainFlow's own board, its own signal, segments kept (flat, clipping and gaps checked)."""
    from firmware_bridge.guide import GuidedCollection, Prompter
    from firmware_bridge.plan import Plan
    from firmware_bridge.recorder import Recorder, RecordingThread
    from tinynas.data.session import load_session

    plan = Plan("board", ("a", "b"), kind="continuous", window_seconds=0.25, hold_seconds=0.5, repetitions=1,
                rest_seconds=0.0, countdown=0)
    with link_for_url("brainflow:synthetic_board").open() as link:
        hello = link.wait_hello(5)
        with Recorder(tmp_path / "session", hello, labels=plan.classes, plan=plan.to_dict()) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            try:
                result = GuidedCollection(recorder, plan, Prompter(), timeout_seconds=30 * slowdown()).run()
            finally:
                thread.stop()
    assert dict(result.accepted) == {"a": 1, "b": 1} and link.counters.bad_values == 0
    data = load_session(tmp_path / "session")
    assert len(data) == 4 and data.x.shape[2] == hello.channels and np.all(np.isfinite(data.x))
