"""A sensor that prints numbers per line (an Arduino's Serial.println), read through a real pty: the framed link's
guarantees hold (bit for bit, nothing recorded re-indexed after a restart, no window over it), the rate is checked
against the stated one, and malformed lines are counted and skipped."""

import os
import threading
import time

import numpy as np
import pytest

from devtools.machine_speed import slowdown
from firmware_bridge.link import DeviceReset, LinkError, link_for_url
from firmware_bridge.protocol import Hello, Samples
from firmware_bridge.recorder import Recorder, RecordingThread
from firmware_bridge.simulator import ArraySource, Simulator
from firmware_bridge.text_link import TextLink
from tinynas.data.session import load_session


def _wait(condition, timeout=60.0):
    deadline = time.monotonic() + timeout * slowdown()
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


@pytest.fixture
def printing_sketch():
    """(the pty's name, `start(lines, rate)`): a device printing `lines()`'s lines at `rate` lines a second once
    started (start it after the port is open: opening a port drops what was sent before, a header included); a
    number among the lines is a silence of that many seconds (a reset), after which the pace goes on."""
    master, slave = os.openpty()
    stop = threading.Event()

    def start(lines, rate):
        def run():
            started = time.monotonic()
            for n, line in enumerate(lines()):
                if stop.is_set():
                    return
                if isinstance(line, float):
                    time.sleep(line)
                    started = time.monotonic() - n / rate
                    continue
                delay = started + n / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                os.write(master, line.encode() + b"\r\n")
        threading.Thread(target=run, daemon=True).start()

    yield os.ttyname(slave), start
    stop.set()
    time.sleep(0.1)
    os.close(master)
    os.close(slave)


def test_a_replayed_recording_comes_back_bit_for_bit_and_a_restart_rewrites_nothing(tmp_path):
    recording = np.random.default_rng(0).integers(-128, 128, size=(400, 8)).astype(np.int8)
    hello = Hello("sketch", "1", 8, 200.0, "int8")
    with Simulator(ArraySource(recording), hello, port_dir=tmp_path, wire="text") as simulator, \
            TextLink(f"csv:{simulator.port}?rate=200").open() as link:
        said = link.wait_hello(30 * slowdown())
        assert said.channels == 8 and said.sample_rate_hz == 200.0 and said.device_id.startswith("text:")
        with Recorder(tmp_path / "session", said, user="test", labels=["A", "B"]) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            _wait(lambda: recorder.latest_sample >= 800)
            recorder.add_window("A", 0, 400)  # the sketch starts at sample 0 and loops the recording
            recorder.add_window("B", 400, 400)
            simulator.unplug(0.3)  # a USB-powered board: replugged, it prints its banner and counts from 0
            _wait(lambda: link.counters.reconnects >= 1 and recorder.latest_sample >= 1600)
            thread.stop()
        # The replug's silence is not taken for a slow rate: no sample after it was refused as off-rate.
        assert link.counters.bad_lines == 0 and link.counters.foreign_samples == 0 and not link.problem
    windows = load_session(tmp_path / "session")
    assert windows.x.shape == (2, 400, 8)
    assert np.array_equal(windows.x[0], recording.astype(np.float32))
    assert np.array_equal(windows.x[1], recording.astype(np.float32))


def test_a_restart_starts_a_new_epoch_after_everything_received(printing_sketch):
    def lines():
        yield "Booting sketch v2"
        for n in range(700):
            yield f"{n},{-n}"
        yield "Booting sketch v2"  # the board reset (a brown-out): the banner again, the count from 0
        for n in range(700):
            yield f"{n},{-n}"

    port, start = printing_sketch
    with TextLink(f"csv:{port}?rate=200").open() as link:
        start(lines, 200)
        link.wait_hello(30 * slowdown())
        got, resets = [], []
        _wait(lambda: _drain(link, got, resets) >= 1400)
    indices = np.concatenate([m.first_sample + np.arange(len(m.data)) for m in got])
    assert len(resets) == 1 and np.all(np.diff(indices) > 0)  # forward only: nothing re-indexed
    values = np.concatenate([m.data[:, 0] for m in got])
    restart = resets[0].first_sample
    assert values[indices == restart][0] == 0 and indices[np.argmax(indices >= restart) - 1] < restart - 1


def _drain(link, got, resets) -> int:
    while (message := link.get(0.05)) is not None:
        if isinstance(message, Samples):
            got.append(message)
        elif isinstance(message, DeviceReset):
            resets.append(message)
    return sum(len(m.data) for m in got)


def _printed(printing_sketch, lines, count: int):
    """The Samples of the first `count` samples a sketch printing `lines()` at 200 Hz gave, and the link's counters."""
    port, start = printing_sketch
    with TextLink(f"csv:{port}?rate=200").open() as link:
        start(lines, 200)
        link.wait_hello(30 * slowdown())
        got: list = []
        _wait(lambda: _drain(link, got, []) >= count)
        return got, link.counters


def test_malformed_partial_and_overlong_lines_are_counted_and_skipped(printing_sketch):
    bad = ["1,2,3", "nan,4", "5,x", "9" * 2000, "7,"]

    def lines():
        for n in range(600):
            yield bad[n // 100] if n % 100 == 50 and n // 100 < len(bad) else f"{n},{n % 7}"

    got, counters = _printed(printing_sketch, lines, 595)
    assert counters.bad_lines == len(bad)
    values = np.concatenate([m.data for m in got])
    assert np.all(np.isfinite(values)) and values.shape[1] == 2


def test_a_device_at_another_rate_than_stated_is_one_clear_line(printing_sketch):
    port, start = printing_sketch
    with TextLink(f"csv:{port}?rate=200").open() as link, \
            pytest.raises(LinkError, match=r"prints \d+\.\d samples a second, not the stated 200 .*fix the rate"):
        start(lambda: (f"{n}" for n in range(100_000)), 100)
        link.wait_hello(6 * slowdown())


def test_a_clock_column_places_samples_and_shows_the_lines_lost(printing_sketch):
    def lines():
        yield "millis,a0"
        for n in range(800):
            if 300 <= n < 320:
                continue  # 20 lines lost on the way (the sketch's buffer overflowed)
            yield f"{1000 + 5 * n},{n}"

    got, counters = _printed(printing_sketch, lines, 780)
    assert counters.lost_samples == 20
    by_index = {m.first_sample + i: v for m in got for i, v in enumerate(m.data[:, 0])}
    start = min(by_index)
    assert by_index[start + 400] == 400  # the clock, not the count, says where a sample belongs


@pytest.mark.parametrize(("url", "why"), [
    ("csv:/dev/ttyACM0", "say the rate the device prints at"),
    ("csv:/dev/ttyACM0?rate=fast", "rate must be a number of samples a second above 0 and at most 100000, got 'fast'"),
    ("csv:/dev/ttyACM0?rate=0", "rate must be a number of samples a second above 0"),
    ("csv:/dev/ttyACM0?rate=200&speed=2", "unknown option 'speed'"),
])
def test_a_text_url_without_what_it_needs_is_one_line(url, why):
    with pytest.raises(LinkError, match=why):
        link_for_url(url)


@pytest.mark.parametrize("pause", [0.4, 1.5])  # shorter than PAUSE_SECONDS (the banner says it), and longer
def test_a_board_reset_that_prints_a_banner_and_a_header_is_a_new_epoch_not_a_rate_change(printing_sketch, pause):
    """A 500 Hz sketch whose board resets: silent while it boots, then its banner and its header again, and its count
    from 0. The silence is no rate (it once read "prints 124 samples a second, not 500" and dropped the next 1,000
    samples), the banner and header are neither samples nor bad lines, and the restart is one DeviceReset whose
    device index is the 0 the sketch started again from."""
    rate, before, after = 500, 1500, 1500

    def lines():
        yield "n,a0"
        for n in range(before):
            yield f"{n},{n % 13}"
        yield pause  # the reset: the bootloader's silence
        yield "EMG sketch v2 (analogRead, 500 Hz)"
        yield "n,a0"
        for n in range(after):
            yield f"{n},{n % 13}"

    port, start = printing_sketch
    with TextLink(f"csv:{port}?rate={rate}").open() as link:
        start(lines, rate)
        link.wait_hello(30 * slowdown())
        got, resets = [], []
        _wait(lambda: _drain(link, got, resets) >= before + after - 5)
        assert not link.problem and link.counters.foreign_samples == 0 and link.counters.bad_lines == 0
    assert len(resets) == 1 and resets[0].device_first == 0 and link.counters.resets == 1
    values = np.concatenate([m.data for m in got])
    assert values.shape[1] == 1 and len(values) >= before + after - 5  # the counter is the clock, a0 the channel
    indices = np.concatenate([m.first_sample + np.arange(len(m.data)) for m in got])
    assert np.all(np.diff(indices) > 0)


def test_a_counter_column_that_goes_back_is_a_device_reset_without_a_banner(printing_sketch):
    """No banner, no pause: only the sketch's own counter going back says it restarted (a watchdog reset as fast
    as a line)."""
    def lines():
        yield "sample,a0,a1"
        for n in range(600):
            yield f"{n},{n},{-n}"
        for n in range(600):
            yield f"{n},{1000 + n},{-n}"

    got, counters = _printed(printing_sketch, lines, 1195)
    assert counters.resets == 1 and counters.lost_samples == 0 and counters.bad_lines == 0
    values = np.concatenate([m.data[:, 0] for m in got])
    restart = int(np.argmax(values >= 1000))
    assert values[restart] == 1000 and np.all(np.diff(values[:restart]) == 1)


def test_numbers_that_are_no_sample_are_bad_lines_never_samples_nor_a_restart(printing_sketch):
    """NaN, infinity, 1e400 (infinite as a double) and 1e39 (infinite as float32) are refused at the line: counted,
    never a sample, and a line of them is no banner (a restart)."""
    bad = ["nan,nan", "inf,1", "1e400,2", "1e39,3", "-inf,-inf", "NaN,4"]

    def lines():
        for n in range(800):
            yield bad[n // 100] if n % 100 == 50 and n // 100 < len(bad) else f"{n},{n % 7}"

    got, counters = _printed(printing_sketch, lines, 790)
    assert counters.bad_lines == len(bad) and counters.resets == 0
    values = np.concatenate([m.data for m in got])
    assert np.all(np.isfinite(values)) and np.abs(values).max() < 1000


def test_a_clock_value_no_clock_can_have_is_a_bad_line_not_a_gap(printing_sketch):
    """A damaged clock (negative, beyond 2**53, or hours ahead of the time that passed) would have put the next
    samples hours later on the timeline, or overflowed it: such a line is counted and skipped."""
    bad = {100: "-5,1", 200: "1e300,2", 300: "99999999,3"}  # 99999999 ms: a day ahead of the clock's 1.5 s

    def lines():
        yield "millis,a0"
        for n in range(600):
            yield bad.get(n, f"{1000 + 5 * n},{n}")

    got, counters = _printed(printing_sketch, lines, 595)
    assert counters.bad_lines == len(bad) and counters.resets == 0 and counters.lost_samples == len(bad)
    indices = np.concatenate([m.first_sample + np.arange(len(m.data)) for m in got])
    assert indices.max() - indices.min() < 700


@pytest.mark.parametrize(("url", "why"), [
    ("csv:/dev/ttyACM0?rate=nan", "rate must be a number of samples a second above 0 and at most 100000, got 'nan'"),
    ("csv:/dev/ttyACM0?rate=1e308", "rate must be a number of samples a second above 0 and at most 100000"),
    ("csv:/dev/ttyACM0?rate=inf", "rate must be a number of samples a second above 0"),
    ("csv:/dev/ttyACM0?rate=200&channels=2.5", "channels must be an integer from 1 to 255, got '2.5'"),
    ("csv:/dev/ttyACM0?rate=200&channels=256", "channels must be an integer from 1 to 255"),
    ("csv:/dev/ttyACM0?rate=200&baud=0", "baud must be an integer from 1 to 100000000, got '0'"),
])
def test_a_text_option_out_of_its_range_is_one_line_naming_it_and_the_range(url, why):
    with pytest.raises(LinkError, match=why.replace("(", r"\(").replace(")", r"\)")) as caught:
        link_for_url(url)
    assert "\n" not in str(caught.value)
