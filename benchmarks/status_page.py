"""The status page's cost on the device: bytes served, update rate, and the service's CPU while it is open.

    python benchmarks/status_page.py [--seconds 20]

Starts `tinynas service run` in SERVING state on a simulated 8-channel 200 Hz front-end (an int8 A(8,4)
model classifying every 0.1 s, as benchmarks/service_memory.py does), then measures the service process's
CPU time from /proc over `--seconds` twice: with no page open, and with the page open (its assets fetched
once, then status.json once a second, as page.js does). Also times the recording view (an 8-channel 1 kHz
signal trace) on its own. Writes benchmarks/results/status_page.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from firmware_bridge.protocol import Hello, Samples
from firmware_bridge.ring import SampleRing
from firmware_bridge.simulator import ArraySource, Simulator
from tinynas.service.paths import request
from tinynas.service.status_views import trace

RESULTS = Path(__file__).parent / "results"
EXPORT = """
import sys
from tinynas.deploy.random_weights import calibration_windows, randomized_model
from tinynas.deploy.export import convert_int8, write_export
from tinynas.space import Architecture
arch = Architecture(400, 8, 26, k=8, c=4)
tflite = convert_int8(randomized_model(arch, 0), calibration_windows(arch, 32, 0))
write_export(sys.argv[1], arch, tflite, {"classes": [chr(65 + i) for i in range(26)]})
"""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _measure(pid: int, seconds: float, poll: str | None) -> tuple[float, int, int]:
    """CPU share of `pid` over `seconds`, and the requests and bytes served when `poll` is a URL."""
    requests = served = 0
    start_cpu, started = _cpu_seconds(pid), time.monotonic()
    while time.monotonic() - started < seconds:
        if poll:
            served += len(urllib.request.urlopen(poll, timeout=5).read())
            requests += 1
        time.sleep(1.0)
    return (_cpu_seconds(pid) - start_cpu) / (time.monotonic() - started), requests, served


def _trace_cost(repeats: int = 200) -> tuple[float, int]:
    ring = SampleRing(8, 30_000)
    signal = np.random.default_rng(0).normal(0, 300, size=(8000, 8)).astype(np.float32)
    ring.add(Samples(0, signal))
    view = trace(ring, 1000.0, "int16", rest=[10.0] * 8)
    started = time.perf_counter()
    for _ in range(repeats):
        trace(ring, 1000.0, "int16", rest=[10.0] * 8)
    return (time.perf_counter() - started) / repeats, len(json.dumps(view))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        model_dir = root / "data" / "profiles" / "bench" / "deployed" / "m1"
        subprocess.run([sys.executable, "-c", EXPORT, str(model_dir)], check=True)
        (root / "data" / "state.json").write_text(json.dumps({
            "state": "SERVING", "user": "bench", "deployed": {
                "user": "bench", "model": str(model_dir / "model.tflite"), "card": str(model_dir / "card.json"),
                "accuracy": 1.0}}))
        stream = np.random.default_rng(0).integers(-100, 100, size=(4000, 8)).astype(np.int8)
        port = 18765
        with Simulator(ArraySource(stream), Hello("bench", "1", 8, 200.0, "int8"), port_dir=root / "dev") as sim:
            config = root / "tinynas.toml"
            config.write_text(f'port = "{sim.port}"\ndata_dir = "{root / "data"}"\nhttp_port = {port}\n'
                              f'hop_seconds = 0.1\n')
            process = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config",
                                        str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(6)  # start-up and first predictions
                base = f"http://127.0.0.1:{port}"
                assets = {path: len(urllib.request.urlopen(base + path, timeout=5).read())
                          for path in ("/", "/page.js", "/page.css")}
                closed, _, _ = _measure(process.pid, args.seconds, None)
                opened, requests, served = _measure(process.pid, args.seconds, base + "/status.json")
            finally:
                request(root / "data", "stop")
                process.wait(30)
    trace_seconds, trace_bytes = _trace_cost()
    result = {"seconds": args.seconds, "assets_bytes": assets, "page_bytes": sum(assets.values()),
              "status_json_bytes_serving": served / max(requests, 1), "update_hz": 1.0,
              "service_cpu_share_page_closed": closed, "service_cpu_share_page_open": opened,
              "trace_view_seconds_8ch_1khz": trace_seconds, "trace_view_bytes_8ch": trace_bytes,
              "machine": f"{os.cpu_count()} cores x86_64"}
    lines = ["# The status page's cost on the device", "",
             f"Command: `python benchmarks/status_page.py --seconds {args.seconds:g}` on this machine "
             f"({result['machine']}; nothing else running). Service: SERVING on a simulated 8-channel 200 Hz "
             "front-end, an int8 A(8,4) (26 classes) classifying every 0.1 s.", "",
             "| what | figure |", "|---|---|",
             f"| page (HTML + JS + CSS, fetched once) | {result['page_bytes']:,} B |",
             f"| status.json while serving, per update | {result['status_json_bytes_serving']:,.0f} B |",
             "| update rate | 1 per second |",
             f"| recording view: 8-channel trace added to status.json | {trace_bytes:,} B |",
             f"| service CPU, page closed | {100 * closed:.1f} % of one core |",
             f"| service CPU, page open | {100 * opened:.1f} % of one core |",
             f"| computing the 8-channel 1 kHz trace, per update | {1000 * trace_seconds:.2f} ms |", "",
             "On a Raspberry Pi 4 a core is 3-6x slower than this machine's: the page's extra CPU "
             f"({100 * (opened - closed):.1f} points here) becomes about "
             f"{300 * max(opened - closed, 0):.1f}-{600 * max(opened - closed, 0):.1f} % of one of its four cores. "
             f"While recording, the trace adds {1000 * trace_seconds:.1f} ms per update ({100 * trace_seconds:.1f} % "
             f"of a core here at 1 update/s, about {300 * trace_seconds:.1f}-{600 * trace_seconds:.1f} % on the Pi) "
             f"and {trace_bytes / 1024:.0f} KiB per update for 8 channels (about 1.9 KiB per channel).",
             "", "The page needs no internet: no library, font or image is fetched from elsewhere."]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "status_page.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "status_page.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
