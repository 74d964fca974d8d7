"""Resident memory of the service while SERVING (LiteRT only; TensorFlow must not be loaded).

    python benchmarks/service_memory.py [--seconds 20]

Exports a trained-like int8 model once (in a child process with TensorFlow), then starts
`tinynas service run` in SERVING state on a simulated 8-channel front-end and samples the
service process's memory from /proc while it classifies the live stream. Checks its memory
maps for libtensorflow. Writes benchmarks/results/service_memory.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from serving_service import MODEL, serving_service

from tinynas.process_memory import memory_bytes

RESULTS = Path(__file__).parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with serving_service(hop_seconds=0.1) as service:
        pid = service.process.pid
        peak: dict[str, int] = {}
        started = time.monotonic()
        while time.monotonic() - started < args.seconds:
            for key, value in memory_bytes(pid).items():
                peak[key] = max(peak.get(key, 0), value)
            time.sleep(0.2)
        maps = Path(f"/proc/{pid}/maps").read_text()
        tensorflow_loaded = "libtensorflow" in maps
        litert_loaded = "ai_edge_litert" in maps
        predictions = sum(1 for _ in open(service.data / "predictions.jsonl"))
    result = {"seconds": args.seconds, "peak_rss_bytes": peak.get("rss", 0),
              "peak_private_bytes": peak.get("private", 0),
              "peak_file_bytes": peak.get("file", 0), "tensorflow_loaded": tensorflow_loaded,
              "litert_loaded": litert_loaded, "predictions": predictions, "model": MODEL,
              "hop_seconds": 0.1}
    lines = ["# Service memory while serving", "",
             f"Command: `python benchmarks/service_memory.py --seconds {args.seconds:g}` on this machine "
             f"({os.cpu_count()} cores, x86_64).",
             "The service runs `tinynas service run` in SERVING state on a simulated 8-channel 200 Hz front-end, "
             "classifying a 400x8 window every 0.1 s with an int8 A(8,4) model (26 classes) through LiteRT.", "",
             "| peak RSS | private | file-backed | TensorFlow mapped | LiteRT mapped | predictions |",
             "|---|---|---|---|---|---|",
             f"| {result['peak_rss_bytes'] / 2**20:.0f} MiB | {result['peak_private_bytes'] / 2**20:.0f} MiB | "
             f"{result['peak_file_bytes'] / 2**20:.0f} MiB | {'yes' if tensorflow_loaded else 'no'} | "
             f"{'yes' if litert_loaded else 'no'} | {predictions} |"]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "service_memory.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "service_memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
