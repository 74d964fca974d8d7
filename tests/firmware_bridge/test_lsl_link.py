"""A Lab Streaming Layer stream as a front-end, with a real outlet pushed from another process on this machine: the
HELLO from the stream's own rate and channel count, samples placed by their timestamps (a gap the sender left stays
one), a stream that vanishes and returns is a new epoch, and what cannot be opened is one line."""

import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
import pylsl  # a test extra: CI installs it, so these never skip
import pytest

from devtools.machine_speed import slowdown
from firmware_bridge.link import DeviceReset, LinkError, link_for_url
from firmware_bridge.protocol import Samples

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
        with link_for_url("lsl:tinynas-test-gap?timeout=30").open() as link:
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
        with link_for_url("lsl:name=tinynas-test-return&timeout=30").open() as link:
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
    ("lsl:type=EMG&timeout=soon", "timeout must be a number of seconds above 0 and at most 600, got 'soon'"),
])
def test_a_stream_that_cannot_be_opened_is_one_line(url, why):
    with pytest.raises(LinkError, match=why):
        link_for_url(url).open()


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


def _plain_outlet(name: str, kind: str, source_id: str, sign: float, seconds: float) -> None:
    """A plain pylsl outlet, as any lab's program makes one (not tinynas's simulator): CHANNELS at RATE, sample n's
    value sign * (1 + n), so that whose samples arrived is plain."""
    info = pylsl.StreamInfo(name, kind, CHANNELS, RATE, pylsl.cf_float32, source_id)
    outlet = pylsl.StreamOutlet(info)
    started = pylsl.local_clock()
    for n in range(int(seconds * RATE)):
        due = started + n / RATE
        while pylsl.local_clock() < due:
            time.sleep(0.001)
        outlet.push_sample([sign * (1 + n)] * CHANNELS, due)


def _start_plain(name, kind, source_id, sign, seconds=120.0) -> multiprocessing.Process:
    process = multiprocessing.get_context("spawn").Process(target=_plain_outlet,
                                                           args=(name, kind, source_id, sign, seconds), daemon=True)
    process.start()
    return process


@pytest.mark.slow
def test_a_second_stream_of_the_type_is_named_never_switched_to_and_the_first_is_taken_back(tmp_path):
    """`lsl:type=...` reading stream A; stream B of the same type appears; A's outlet is restarted. The link waits for
    A (it once latched onto B, said "connected", and dropped B's samples for 57 s), says in one line that B is there
    and how to name it, and takes A back when it returns, as a new epoch. No sample of B is ever delivered."""
    kind = f"EMG-tinynas-{os.getpid()}"  # this test's own type: nothing else on the machine answers it
    a = _start_plain("armband-A", kind, f"A-{os.getpid()}", 1.0)
    b = restarted = None
    try:
        with link_for_url(f"lsl:type={kind}&timeout=60").open() as link:
            assert link.wait_hello(5).device_id == "lsl:armband-A"
            got, _ = _read(link, 100)
            b = _start_plain("armband-B", kind, f"B-{os.getpid()}", -1.0)
            time.sleep(0.5)
            a.terminate()
            a.join(30)
            deadline = time.monotonic() + 60 * slowdown()
            while "another stream" not in link.problem:
                assert time.monotonic() < deadline, f"not said: {link.problem!r}"
                while (message := link.get(0.05)) is not None:
                    if isinstance(message, Samples):
                        got.append(message)
            assert not link.connected.is_set()
            assert "'armband-A'" in link.problem and "'armband-B'" in link.problem
            assert f"lsl:source_id=B-{os.getpid()}" in link.problem and "\n" not in link.problem
            restarted = _start_plain("armband-A", kind, f"A-{os.getpid()}", 1.0)
            more, resets = _read(link, 200)
            deadline = time.monotonic() + 60 * slowdown()
            while not resets:
                assert time.monotonic() < deadline, "A was not taken back"
                batch, resets = _read(link, 20)
                more += batch
            got += more
            assert link.counters.reconnects == 1 and link.connected.is_set() and not link.problem
    finally:
        for process in (a, b, restarted):
            if process is not None:
                process.terminate()
    values = np.concatenate([m.data[:, 0] for m in got])
    assert np.all(values > 0), "a sample of stream B was delivered as A's"


def test_a_negative_nan_or_endless_timeout_is_refused_before_liblsl_waits():
    """timeout=-1 was liblsl's "wait for ever" (neither Ctrl-C nor SIGTERM ended it); NaN and 1e308 were taken."""
    for text in ("-1", "nan", "1e308", "inf", "0"):
        started = time.monotonic()
        with pytest.raises(LinkError, match=f"timeout must be a number of seconds above 0 and at most 600, got "
                                            f"'{text}'"):
            link_for_url(f"lsl:tinynas-nobody?timeout={text}")
        assert time.monotonic() - started < 5 * slowdown()


def test_closing_the_link_ends_a_long_resolve_at_once():
    """Every wait in liblsl is in slices: close() (the service stopping) ends a resolve of 600 s within a slice."""
    import threading

    link = link_for_url(f"lsl:tinynas-nobody-{os.getpid()}?timeout=600")
    failed = []

    def opening():
        try:
            link.open()
        except LinkError as exc:
            failed.append(str(exc))

    thread = threading.Thread(target=opening)
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    link.close()
    thread.join(30 * slowdown())
    assert not thread.is_alive() and time.monotonic() - started < 2 * slowdown()
    assert failed == [f"cannot open lsl:tinynas-nobody-{os.getpid()}?timeout=600: stopped while looking for the "
                      f"stream"]


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_sigterm_or_ctrl_c_ends_a_collect_waiting_for_a_stream(tmp_path, signal_name):
    """`tinynas collect --port lsl:NAME?timeout=600` with no such stream, stopped by SIGTERM (systemd, kill) or Ctrl-C
    while liblsl looks for it: it ends at once with tinynas's "interrupted" line (only kill -9 ended it before)."""
    import signal
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "collect", "--port",
                              f"lsl:tinynas-nobody-{os.getpid()}?timeout=600", "--plan", "gestures4", "--out",
                              str(tmp_path / "s"), "--headless"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.monotonic() + 120 * slowdown()
        # liblsl is loaded when the link is made, and the link is opened (600 s of looking) right after: a second
        # later the command waits on liblsl. (Earlier, the outcome would be the same: the CLI's handler is in place.)
        while "liblsl" not in Path(f"/proc/{child.pid}/maps").read_text():
            assert child.poll() is None and time.monotonic() < deadline, child.stderr.read() if child.stderr else ""
            time.sleep(0.05)
        time.sleep(1.0)
        child.send_signal(getattr(signal, signal_name))
        _, stderr = child.communicate(timeout=30 * slowdown())
    finally:
        child.kill()
    assert child.returncode == 130 and stderr.strip().splitlines()[-1] == "tinynas: interrupted", stderr


def _signing_outlet(name, kind, source_id, commands, seconds: float) -> None:
    """A plain pylsl outlet of 4 channels at RATE with an offset (a raw ADC's 512); a channel number put on
    `commands` makes a second of movement on it, as a person's sign."""
    import math
    import queue
    import random

    info = pylsl.StreamInfo(name, kind, 4, RATE, pylsl.cf_float32, source_id)
    outlet = pylsl.StreamOutlet(info)
    rng, started, moving, until = random.Random(0), pylsl.local_clock(), 0, -1
    for n in range(int(seconds * RATE)):
        try:
            moving, until = commands.get_nowait(), n + int(RATE)
        except queue.Empty:
            pass
        due = started + n / RATE
        while pylsl.local_clock() < due:
            time.sleep(0.001)
        outlet.push_sample([512 + rng.gauss(0, 2) + ((400 if c == moving else 40) * math.sin(n + c) if n < until
                                                      else 0.0) for c in range(4)], due)


@pytest.mark.slow
def test_windows_are_collected_from_a_plain_outlet_with_a_second_stream_of_its_type_present(tmp_path):
    """`lsl:type=...` on a plain outlet (not tinynas's; a raw ADC's offset of 512), and another program's stream of
    the same type appearing once it is read: the link keeps to the first, and a guided collection on it keeps every
    prompt's window on the first attempt, each signed on that stream (B's samples are negative: none is in them)."""
    from firmware_bridge.guide import GuidedCollection, Prompter
    from firmware_bridge.plan import Plan
    from firmware_bridge.recorder import Recorder, RecordingThread
    from tinynas.data.session import load_session

    kind = f"EMG-tinynas-collect-{os.getpid()}"
    spawn = multiprocessing.get_context("spawn")
    commands = spawn.Queue()
    first = spawn.Process(target=_signing_outlet, args=("armband-A", kind, f"A-{os.getpid()}", commands, 300.0),
                          daemon=True)
    first.start()
    second = None
    plan = Plan("lsl", ("fist", "open"), repetitions=2, window_seconds=0.5, rest_seconds=1.0, countdown=1)
    try:
        with link_for_url(f"lsl:type={kind}&timeout=60").open() as link:
            hello = link.wait_hello(5)
            second = _start_plain("armband-B", kind, f"B-{os.getpid()}", -1.0)  # another program's stream
            with Recorder(tmp_path / "session", hello, labels=plan.classes, plan=plan.to_dict()) as recorder:
                thread = RecordingThread(link, recorder)
                thread.start()
                try:
                    result = GuidedCollection(recorder, plan, Prompter(), timeout_seconds=60,
                                              on_prompt=lambda label, _go: commands.put(plan.classes.index(label)),
                                              ).run()
                finally:
                    thread.stop()
            assert link.counters.foreign_samples == 0 and link.counters.reconnects == 0
    finally:
        for process in (first, second):
            if process is not None:
                process.terminate()
    assert hello.device_id == "lsl:armband-A" and hello.channels == 4
    assert dict(result.accepted) == {"fist": 2, "open": 2} and result.rejected == 0
    data = load_session(tmp_path / "session")
    assert data.x.min() > 0 and data.x.std(axis=1).argmax(axis=1).tolist() == data.y.tolist()
