"""Does the link keep up at the sensor's true rate on loaded cores? Dropped messages and lost samples.

    nice python benchmarks/link_realtime.py [--seconds 30]

The simulator streams at the true rate (paced, as a front-end does) over a real pseudo-terminal; the host
reads it with `Link` and records it with `Recorder` (fsync every second), as the service does, while the
machine is loaded: two processes spin on the two cores and, in the recording process, a thread does
Python work holding the GIL (what the service's other threads do while it records); once, 10 s in, the
consumer stalls for `--stall` seconds (the recording thread held up: a TensorFlow import in the same
process, a slow SD card's fsync), which the link's bounded queue must bridge. Each layout is run with the
old fixed 16-sample frames and with `protocol.frame_samples` (20 ms per frame), side by side; then a sketch that
prints one line of numbers per sample (`firmware_bridge.text_link`) at 12 kHz x 1 and 200 Hz x 8. The reader's
CPU share is its thread's CPU time (/proc) over the run's wall time.
Writes benchmarks/results/link-realtime.md and .json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from firmware_bridge.link import Link
from firmware_bridge.protocol import Hello, frame_samples
from firmware_bridge.recorder import Recorder
from firmware_bridge.simulator import ArraySource, Simulator
from firmware_bridge.text_link import TextLink

RESULTS = Path(__file__).parent / "results"
LAYOUTS = (("vibration 1 ch int16, 12 kHz", 1, 12_000.0), ("accelerometer 3 ch int16, 3.2 kHz", 3, 3_200.0))
TEXT_LAYOUTS = (("plain text, vibration 1 ch, 12 kHz", 1, 12_000.0), ("plain text, sEMG 8 ch, 200 Hz", 8, 200.0))


def _thread_cpu_seconds(thread: threading.Thread) -> float:
    """CPU time (user + system) of a running thread of this process, from /proc."""
    fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spin(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


def _gil_hog(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(i * i for i in range(20_000))  # pure Python: holds the GIL between ticks
        time.sleep(0.001)


def _consume(link, recorder: Recorder, stop: threading.Event, stall_at: float, stall: float) -> None:
    """What RecordingThread does, stalling once for `stall` seconds at `stall_at` (monotonic)."""
    stalled = False
    while not stop.is_set():
        if not stalled and time.monotonic() >= stall_at:
            stalled = True
            time.sleep(stall)
        message = link.get(timeout=0.1)
        if message is not None:
            recorder.handle(message)


def measure(channels: int, rate: float, block: int, seconds: float, stall: float, wire: str = "frames") -> dict:
    """Counters of one paced run of `seconds` with the machine loaded."""
    rng = np.random.default_rng(0)
    stream = (rng.normal(size=(max(int(rate), 400), channels)) * 500).astype(np.int16)
    hello = Hello("bench", "1", channels, rate, "int16")
    with tempfile.TemporaryDirectory() as folder:
        with Simulator(ArraySource(stream), hello, block=block, port_dir=folder, wire=wire) as simulator, \
                (Link(simulator.port) if wire == "frames" else TextLink(f"csv:{simulator.port}?rate={rate:g}")
                 ).open() as link:
            with Recorder(Path(folder) / "session", link.wait_hello(10)) as recorder:
                reader = link._thread
                assert reader is not None
                cpu, started = _thread_cpu_seconds(reader), time.monotonic()
                stop = threading.Event()
                thread = threading.Thread(target=_consume, args=(link, recorder, stop, time.monotonic() + 10.0,
                                                                 stall), daemon=True)
                thread.start()
                time.sleep(seconds)
                share = (_thread_cpu_seconds(reader) - cpu) / (time.monotonic() - started)
                sent = simulator.sample_index
                stop.set()
                thread.join(timeout=10)
                written, gaps = recorder.samples_written, recorder.gaps
            counters = link.counters.to_dict()
    return {"block": block, "frames_per_second": rate / block, "samples_sent": sent, "samples_recorded": written,
            "lost_samples": sum(b - a for a, b in gaps), "queue_drops": counters["queue_drops"],
            "bad_crc": counters["bad_crc"], "gaps": counters["gaps"], "bad_lines": counters["bad_lines"],
            "reader_cpu_share": round(share, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--stall", type=float, default=8.0, help="seconds the consumer stalls once (0: never)")
    args = parser.parse_args()
    stop_spinners = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop_spinners,), daemon=True) for _ in range(2)]
    for spinner in spinners:
        spinner.start()
    stop_hog = threading.Event()
    hog = threading.Thread(target=_gil_hog, args=(stop_hog,), daemon=True)
    hog.start()
    rows = []
    try:
        for name, channels, rate in LAYOUTS:
            for block in (16, frame_samples(rate, channels, "int16")):
                row = {"layout": name, "channels": channels, "rate_hz": rate,
                       **measure(channels, rate, block, args.seconds, args.stall)}
                rows.append(row)
                print(f"{name}, {block} samples/frame: {row['queue_drops']} dropped messages, "
                      f"{row['lost_samples']} lost samples of {row['samples_sent']}", file=sys.stderr)
        for name, channels, rate in TEXT_LAYOUTS:
            block = frame_samples(rate, channels, "int16")  # lines written in 20 ms bursts, as a USB CDC port does
            row = {"layout": name, "channels": channels, "rate_hz": rate,
                   **measure(channels, rate, block, args.seconds, args.stall, wire="text")}
            rows.append(row)
            print(f"{name}: {row['queue_drops']} dropped messages, {row['lost_samples']} lost samples of "
                  f"{row['samples_sent']}, {row['bad_lines']} bad lines", file=sys.stderr)
    finally:
        stop_hog.set()
        stop_spinners.set()
        for spinner in spinners:
            spinner.join(timeout=5)
    lines = ["# Link at the sensor's true rate on loaded cores", "",
             f"Command: `nice python benchmarks/link_realtime.py --seconds {args.seconds:g} --stall {args.stall:g}` "
             f"on this machine "
             f"({os.cpu_count()} cores, x86_64); each run {args.seconds:g} s of paced streaming over a pseudo-"
             "terminal into `Link` + `Recorder`, with two spinning processes and a GIL-holding Python thread "
             f"in the recording process, the recording thread stalled once for {args.stall:g} s (10 s in). "
             "Nothing else ran on the machine.", "",
             "| layout | samples / frame | frames / s | samples sent | recorded | lost samples | dropped messages "
             "| bad CRC or lines | reader CPU |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['layout']} | {r['block']} | {r['frames_per_second']:,.0f} | {r['samples_sent']:,} "
                     f"| {r['samples_recorded']:,} | {r['lost_samples']:,} | {r['queue_drops']:,} "
                     f"| {r['bad_crc'] + r['bad_lines']} | {r['reader_cpu_share']:.0%} |")
    lines += ["", "`recorded` can trail `sent` by the frames still in flight when the run stopped; lost samples "
              "are gaps inside the recording (what a window must never span). The product's frames are the "
              "second row of each layout (`firmware_bridge.protocol.frame_samples`). Plain text: one line per "
              "sample, written in 20 ms bursts; its 'frames / s' are those bursts. The simulator runs in the "
              "recording process (its formatting shares the GIL with the reader: a real sensor does it on its own "
              "chip)."]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "link-realtime.json").write_text(json.dumps(rows, indent=2) + "\n")
    (RESULTS / "link-realtime.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
