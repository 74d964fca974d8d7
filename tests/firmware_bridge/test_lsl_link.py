"""A Lab Streaming Layer stream as a front-end, with a real outlet pushed from another process on this machine: the
HELLO from the stream's own rate and channel count, samples placed by their timestamps (a gap the sender left stays
one), a stream that vanishes and returns is a new epoch, and what cannot be opened is one line."""

import multiprocessing
import time

import pylsl  # a test extra: CI installs it, so these never skip
import pytest

from devtools.machine_speed import slowdown
from firmware_bridge.link import DeviceReset, LinkError
from firmware_bridge.protocol import Samples
from firmware_bridge.text_link import open_link

RATE, CHANNELS = 200.0, 8


def _outlet(name: str, seconds: float, skip: tuple[int, int] = (0, 0)) -> None:
    """An armband's outlet: CHANNELS at RATE, sample n's value n, timestamps on the sender's clock; samples in
    `skip` are never sent (the network lost them)."""
    info = pylsl.StreamInfo(name, "EMG", CHANNELS, RATE, pylsl.cf_float32, f"{name}-1")
    outlet = pylsl.StreamOutlet(info)
    started = pylsl.local_clock()
    for n in range(int(seconds * RATE)):
        due = started + n / RATE
        while pylsl.local_clock() < due:
            time.sleep(0.001)
        if not skip[0] <= n < skip[1]:
            outlet.push_sample([float(n)] * CHANNELS, due)


def _start(name: str, seconds: float, skip=(0, 0)) -> multiprocessing.Process:
    process = multiprocessing.get_context("spawn").Process(target=_outlet, args=(name, seconds, skip), daemon=True)
    process.start()
    return process


def _read(link, count: int):
    got, resets, deadline = [], [], time.monotonic() + 60 * slowdown()
    while sum(len(m.data) for m in got) < count:
        assert time.monotonic() < deadline, "timed out"
        message = link.get(0.1)
        if isinstance(message, Samples):
            got.append(message)
        elif isinstance(message, DeviceReset):
            resets.append(message)
    return got, resets


@pytest.mark.slow
def test_a_stream_is_read_by_its_timestamps_and_a_gap_the_sender_left_stays_one():
    outlet = _start("tinynas-test-gap", 6.0, skip=(300, 320))
    try:
        with open_link("lsl:tinynas-test-gap?timeout=30").open() as link:
            hello = link.wait_hello(5)
            assert (hello.channels, hello.sample_rate_hz) == (CHANNELS, RATE)
            got, _ = _read(link, 500)
            assert link.counters.lost_samples == 20
    finally:
        outlet.terminate()
    by_index = {m.first_sample + i: row[0] for m in got for i, row in enumerate(m.data)}
    first = min(by_index)
    assert all(by_index[first + k] - by_index[first] == k for k in range(0, 480, 7) if first + k in by_index)


@pytest.mark.slow
def test_a_stream_that_vanishes_and_returns_is_a_new_epoch():
    first = _start("tinynas-test-return", 3.0)
    try:
        with open_link("lsl:name=tinynas-test-return&timeout=30").open() as link:
            link.wait_hello(5)
            _read(link, 200)
            first.join(30)
            second = _start("tinynas-test-return", 20.0)
            try:
                got, resets = _read(link, 400)
                deadline = time.monotonic() + 60 * slowdown()
                while not resets and time.monotonic() < deadline:
                    resets += _read(link, 50)[1]
                assert resets and link.counters.reconnects >= 1
            finally:
                second.terminate()
    finally:
        first.terminate()


@pytest.mark.parametrize(("url", "why"), [
    ("lsl:tinynas-no-such-stream?timeout=0.5", "no LSL stream with name 'tinynas-no-such-stream' within 0.5 s"),
    ("lsl:color=blue", "give one of name, type, source_id"),
    ("lsl:type=EMG&timeout=soon", "timeout must be seconds"),
])
def test_a_stream_that_cannot_be_opened_is_one_line(url, why):
    with pytest.raises(LinkError, match=why):
        open_link(url).open()


@pytest.mark.parametrize("clock", [1.0, 0.995, 1.005])  # the sender's clock: true, 0.5 % slow, 0.5 % fast
def test_push_jitter_and_a_drifting_clock_are_no_gap_and_a_gap_stays_one(clock):
    """Stamps as a sender's program makes them: chunks of 5 stamped when pushed, up to 40 ms late, by a clock a
    little off the nominal rate, and 100 samples never sent: the timeline has that one gap and no other."""
    import numpy as np

    from firmware_bridge.lsl_link import LslLink

    link = LslLink(f"lsl:placement-{clock}")  # not opened: only its placement of timestamps
    rng = np.random.default_rng(0)
    sent = np.r_[0:2000, 2100:6000]
    indices = []
    for chunk in np.array_split(sent, len(sent) // 5):
        pushed = chunk[-1] / RATE * clock + rng.uniform(0.0, 0.04)
        indices.append(link._place(pushed - (chunk[-1] - chunk) / RATE, RATE))
    steps = np.diff(np.concatenate(indices))
    assert np.all(steps >= 1)
    assert np.sum(steps > 1) == 1 and abs(steps.max() - 101) <= 0.05 * RATE + 0.04 * RATE


def test_pylsl_without_its_library_is_one_line(tmp_path):
    """What a Raspberry Pi meets (PyPI's pylsl bundles liblsl for x86_64 only): pylsl with no liblsl to find is one
    line saying what to install."""
    from tests.support.elsewhere import open_with_changed_package

    def no_library(copy):
        for library in (copy / "lib").glob("liblsl*"):
            library.unlink()

    lines = open_with_changed_package(tmp_path, pylsl, no_library, "lsl:type=EMG")
    assert len(lines) == 1 and "pylsl finds no liblsl" in lines[0] and "PYLSL_LIB" in lines[0], lines


def test_liblsl_says_nothing_on_stderr_unless_it_fails():
    """liblsl logs INFO lines on stderr at its first call: through tinynas, an outlet and an inlet print nothing
    (a command's one-line rule), unless the user configured liblsl themselves (LSLAPICFG)."""
    import subprocess
    import sys

    code = ("from firmware_bridge.lsl_link import import_pylsl\n"
            "pylsl = import_pylsl('test')\n"
            "outlet = pylsl.StreamOutlet(pylsl.StreamInfo('tinynas-quiet', 'EMG', 1, 100.0, source_id='q'))\n"
            "print(len(pylsl.resolve_byprop('name', 'tinynas-quiet', 1, 5.0)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60 * slowdown())
    assert done.stdout.strip() == "1" and done.stderr == "", done.stderr
