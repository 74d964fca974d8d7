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
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
from serving_service import serving_service

from firmware_bridge.protocol import Samples
from firmware_bridge.ring import SampleRing
from tinynas.service.status_views import trace

RESULTS = Path(__file__).parent / "results"


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
    with serving_service(startup_seconds=6) as service:
        base = service.base_url
        assets = {path: len(urllib.request.urlopen(base + path, timeout=5).read())
                  for path in ("/", "/page.js", "/page.css")}
        closed, _, _ = _measure(service.process.pid, args.seconds, None)
        opened, requests, served = _measure(service.process.pid, args.seconds, base + "/status.json")
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
             f"The page's extra CPU is {100 * (opened - closed):+.2f} points of a core here (/proc counts 10 ms "
             f"ticks: about {100 * 0.01 / args.seconds:.2f} points of resolution over {args.seconds:g} s); a "
             f"Raspberry Pi 4's core is 3-6x slower, so about {300 * max(opened - closed, 0):.1f}-"
             f"{600 * max(opened - closed, 0):.1f} % of one of its four cores. While recording, the trace adds "
             f"{1000 * trace_seconds:.1f} ms per update ({100 * trace_seconds:.1f} % of a core here at 1 update/s, "
             f"about {300 * trace_seconds:.1f}-{600 * trace_seconds:.1f} % on the Pi) and {trace_bytes / 1024:.0f} KiB "
             "per update for 8 channels (about 1.9 KiB per channel).",
             "", "The page needs no internet: no library, font or image is fetched from elsewhere."]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "status_page.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "status_page.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
