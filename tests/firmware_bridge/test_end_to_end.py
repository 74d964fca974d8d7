"""Simulator -> real pseudo-terminal -> Link (pySerial) -> Recorder -> session loader."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.link import Link, LinkError, link_for_url
from firmware_bridge.protocol import Hello, Samples
from firmware_bridge.recorder import Recorder, RecordingThread
from firmware_bridge.simulator import ArraySource, Faults, Simulator
from tinynas.data.session import load_session, read_samples

SHARED_ISL = Path(__file__).resolve().parents[3] / "shared" / "data" / "isl" / "Dataset" / "A"


def _isl_recording() -> np.ndarray:
    """One real ISL recording (400 x 8 int8) when ../shared/data is here, else a generated one."""
    files = sorted(SHARED_ISL.glob("*.json")) if SHARED_ISL.is_dir() else []
    if files:
        return np.asarray(json.loads(files[0].read_text())["emg"]["data"], dtype=np.int8)
    return np.random.default_rng(0).integers(-128, 128, size=(400, 8)).astype(np.int8)


def _wait(condition, timeout=120.0):  # generous: a loaded machine is slow, nothing here is timed
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


@pytest.fixture
def emg_hello():
    return Hello("sim-myo", "1.0", 8, 200.0, "int8")


def test_replayed_isl_recording_comes_back_bit_for_bit(tmp_path, emg_hello):
    recording = _isl_recording()
    with Simulator(ArraySource(recording), emg_hello, port_dir=tmp_path, speed=8) as simulator, \
            Link(simulator.port).open() as link:
        hello = link.wait_hello(30)
        assert hello == emg_hello
        with Recorder(tmp_path / "session", hello, user="test", labels=["A", "B"]) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            # The simulator starts at sample 0 and loops the recording: samples 400..799 repeat it.
            _wait(lambda: recorder.latest_sample >= 800)
            recorder.add_window("A", 0, 400)
            recorder.add_window("B", 400, 400)
            thread.stop()
        assert link.counters.bad_crc == 0 and link.counters.gaps == 0
    windows = load_session(tmp_path / "session")
    assert windows.x.shape == (2, 400, 8)
    assert np.array_equal(windows.x[0], recording.astype(np.float32))
    assert np.array_equal(windows.x[1], recording.astype(np.float32))


def test_unplug_of_a_self_powered_device_reconnects_and_records_the_gap(tmp_path, emg_hello):
    source = ArraySource(np.arange(800 * 8, dtype=np.int64).reshape(800, 8) % 100 - 50)
    source.stream = source.stream.astype(np.int8)
    with Simulator(source, emg_hello, port_dir=tmp_path, speed=4) as simulator, Link(simulator.port).open() as link:
        hello = link.wait_hello(30)
        with Recorder(tmp_path / "session", hello) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            _wait(lambda: recorder.latest_sample >= 200)
            simulator.unplug(0.6, restart=False)  # its counter runs on while unplugged
            _wait(lambda: link.counters.reconnects >= 1)
            resumed_from = recorder.latest_sample
            _wait(lambda: recorder.latest_sample >= resumed_from + 400)
            thread.stop()
            assert recorder.gaps, "the unplug should leave a gap in the sample indices"
            first_gap = recorder.gaps[0]
            assert first_gap[1] > first_gap[0]
    events = [json.loads(line) for line in (tmp_path / "session" / "events.jsonl").read_text().splitlines()]
    assert any("gap" in event for event in events)
    stream = read_samples(tmp_path / "session", 8)
    assert not stream.received[first_gap[0]:first_gap[1]].any()
    assert stream.received[:first_gap[0]].all() and stream.received[first_gap[1]:].all()
    # Samples after the gap are the device's, at the right indices.
    index = first_gap[1]
    assert np.array_equal(stream.samples[index], source.stream[index % 800].astype(np.float32))


# Every input the service reads (issue 57): tinynas's frames, a sketch's plain text, a Cyton through BrainFlow's
# driver, an LSL stream. The others stream at their true rate (the host takes the stated one): speed 1.
INPUTS = {"frames": ("{port}", 4), "text": ("csv:{port}?rate={rate:g}", 1),
          "cyton": ("brainflow:cyton?serial_port={port}", 1), "lsl": ("{port}", 1)}


@pytest.mark.parametrize("wire", INPUTS)
def test_a_replugged_device_that_restarts_its_counter_rewrites_no_accepted_window(tmp_path, wire):
    """A USB-powered front-end counts from 0 again after a replug: the windows accepted before it must read
    back byte for byte, and the new samples land after them (a new epoch), not on top of them."""
    rng = np.random.default_rng(0)
    source = ArraySource(rng.integers(-100, 100, size=(1000, 8)).astype(np.int8))
    url, speed = INPUTS[wire]
    hello = Hello("sim-myo", "1.0", 8, 250.0 if wire == "cyton" else 200.0, "int8")
    with Simulator(source, hello, port_dir=tmp_path, speed=speed, wire=wire) as simulator, \
            link_for_url(url.format(port=simulator.port, rate=hello.sample_rate_hz)).open() as link:
        hello = link.wait_hello(30)
        with Recorder(tmp_path / "session", hello, labels=["A", "B"]) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            _wait(lambda: recorder.latest_sample >= 600)
            accepted = {}
            for label, start in (("A", 100), ("B", 300)):
                accepted[label] = recorder.window(start, 200)
                recorder.add_window(label, start, 200)
            before = recorder.latest_sample
            simulator.unplug(0.5)  # restarts: its counter goes back to 0
            _wait(lambda: link.counters.resets >= 1 and recorder.latest_sample >= before + 800)
            after = recorder.latest_sample
            # A window cut after the replug, as the guide cuts one from the live stream.
            accepted["A2"] = recorder.window(after - 300, 200)
            recorder.add_window("A", after - 300, 200)
            thread.stop()
    assert simulator.restarts == 1 and link.counters.reconnects >= 1
    events = [json.loads(line) for line in (tmp_path / "session" / "events.jsonl").read_text().splitlines()]
    resets = [e["reset"] for e in events if "reset" in e]
    assert [reset["epoch"] for reset in resets] == [1]
    windows = load_session(tmp_path / "session")
    assert windows.provenance["changed_windows"] == 0 and len(windows) == 3
    for got, label in zip(windows.x, ("A", "B", "A2")):
        assert np.array_equal(got, accepted[label])
    # The new epoch starts after everything recorded before it, with a gap no window can span. (After `before`:
    # the chunks on their way when it was read, before the device went off, land between the two.)
    stream = read_samples(tmp_path / "session", 8)
    first_again = resets[0]["link_first"]
    assert before <= first_again - 1 < windows.time_index[2]
    assert stream.received[before - 1] and not stream.received[first_again - 1] and stream.received[first_again]


def test_a_resumed_recording_continues_after_the_last_sample(tmp_path, emg_hello):
    """A power cut restarts the device and the recorder: the resumed session goes on after what it holds."""
    folder = tmp_path / "session"
    first = np.arange(400 * 8).reshape(400, 8) % 100
    second = -first
    with Recorder(folder, emg_hello) as recorder:
        recorder.add_samples(Samples(0, first.astype(np.int8)))
        recorder.add_window("A", 0, 400)
    with Recorder(folder, emg_hello) as recorder:  # the device counts from 0 again
        recorder.add_samples(Samples(0, second.astype(np.int8)))
        recorder.add_window("B", recorder.latest_sample - 400, 400)
    windows = load_session(folder)
    assert np.array_equal(windows.x[0], first.astype(np.float32))
    assert np.array_equal(windows.x[1], second.astype(np.float32))
    assert windows.time_index.tolist() == [0, 401]


def test_corrupted_wire_loses_frames_not_correctness(tmp_path, emg_hello):
    recording = _isl_recording()
    faults = Faults(drop_byte_probability=0.002, flip_bit_probability=0.002, seed=3)
    with Simulator(ArraySource(recording), emg_hello, faults=faults, port_dir=tmp_path, speed=10) as simulator, \
            Link(simulator.port).open() as link:
        link.wait_hello(30)
        blocks = []
        _wait(lambda: (blocks.extend(m for m in [link.get(0.05)] if isinstance(m, Samples)) or len(blocks) >= 60))
    assert link.counters.bad_crc + link.counters.bad_frames > 0
    for block in blocks:
        expected = recording[(block.first_sample + np.arange(len(block.data))) % 400]
        assert np.array_equal(block.data, expected)


def test_missing_port_is_a_clear_error(tmp_path):
    with pytest.raises(LinkError, match="cannot open"):
        Link(str(tmp_path / "nope")).open()


def test_silent_device_times_out(tmp_path):
    with Link("loop://").open() as link:
        with pytest.raises(LinkError, match="no HELLO from loop:// within 0.2 s"):
            link.wait_hello(0.2)


KILLED_RECORDER = """
import sys, time
import numpy as np
from firmware_bridge.link import Link
from firmware_bridge.protocol import Hello
from firmware_bridge.recorder import Recorder, RecordingThread
from firmware_bridge.simulator import ArraySource, Simulator
folder, port_dir = sys.argv[1], sys.argv[2]
stream = (np.arange(4000 * 2) % 251 - 125).astype(np.int16).reshape(4000, 2)
hello = Hello("sim", "1", 2, 1000.0, "int16")
simulator = Simulator(ArraySource(stream), hello, port_dir=port_dir).start()
link = Link(simulator.port).open()
recorder = Recorder(folder, link.wait_hello(30), fsync_interval=0.2)
thread = RecordingThread(link, recorder)
thread.start()
while True:
    time.sleep(0.05)
    print(recorder.samples_written, recorder.samples_synced, flush=True)
"""


@pytest.mark.slow
def test_recorder_killed_mid_session_keeps_what_was_fsynced(tmp_path):
    folder = tmp_path / "session"
    process = subprocess.Popen([sys.executable, "-c", KILLED_RECORDER, str(folder), str(tmp_path)],
                               stdout=subprocess.PIPE, text=True)
    written = synced = 0
    deadline = time.monotonic() + 120
    # The recorder says what it has fsynced: no guess about how fast a loaded machine gets there.
    while synced < 1500 and time.monotonic() < deadline:
        line = process.stdout.readline().split()
        if line:
            written, synced = int(line[0]), int(line[1])
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    assert synced >= 1500 and written >= synced
    stream = read_samples(folder, 2)
    # Everything fsynced before the kill reads back intact.
    written = synced
    assert stream.received[:written].all()
    expected = (np.arange(4000 * 2) % 251 - 125).reshape(4000, 2)
    assert np.array_equal(stream.samples[:written], expected[np.arange(written) % 4000].astype(np.float32))


def test_a_simulator_that_stops_leaves_a_newer_simulators_port_alone(tmp_path, emg_hello):
    """Restarting the simulated device (stop the old one after the new one took the port) must not unplug the new."""
    recording = np.zeros((400, emg_hello.channels), dtype=np.int8)
    old = Simulator(ArraySource(recording), emg_hello, port_dir=tmp_path).start()
    new = Simulator(ArraySource(recording), emg_hello, port_dir=tmp_path).start()  # the same port name
    try:
        assert new.port == old.port
        old.stop()
        with Link(new.port).open() as link:
            assert link.wait_hello(10) == emg_hello
    finally:
        new.stop()
    assert not Path(new.port).exists()  # its own link it does remove


class _LoopbackChip:
    """A UART loopback plug where the model's core would be: what the host sends comes back (the transport alone;
    the real test firmware answers in tests/hil/test_on_sensor_link.py)."""

    def __init__(self):
        self.answer, self.resets = None, 0

    def attach(self, answer):
        self.answer = answer

    def write(self, data):
        self.answer(data)

    def reset(self):
        self.resets += 1


def test_a_front_end_that_holds_a_model_tunnels_its_test_bytes_between_the_samples(tmp_path, emg_hello):
    from firmware_bridge.protocol import ChipTest, Ping, Pong

    chip = _LoopbackChip()
    with Simulator(ArraySource(_isl_recording()), emg_hello, port_dir=tmp_path, speed=4, chip=chip) as simulator, \
            Link(simulator.port).open() as link:
        hello = link.wait_hello(30)
        assert hello.answers_tests and hello.channels == emg_hello.channels
        payload = bytes(range(256)) * 20  # more than one frame's payload, zeros and all
        link.send(ChipTest(payload[:4096]))  # a frame's payload at most: the chip's answer comes back in two
        link.send(ChipTest(payload[4096:]))
        link.ping(7)
        got = b""
        deadline = time.monotonic() + 60
        while len(got) < len(payload) and time.monotonic() < deadline:
            got += link.chip_bytes(0.5)
        assert got == payload
        seen = []
        _wait(lambda: seen.append(link.get(0.1)) or any(isinstance(m, Pong) and m.nonce == 7 for m in seen))
        # The samples' consumer never sees the chip's bytes; the samples kept coming meanwhile.
        assert not any(isinstance(m, (ChipTest, Ping)) for m in seen)
        assert link.counters.samples > 0 and link.counters.bad_frames == 0
        simulator.unplug(0.3)  # one power supply: the model's core starts again with the sensor
        _wait(lambda: link.counters.reconnects >= 1)
        assert chip.resets == 1
