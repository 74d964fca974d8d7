"""A real `tinynas service run` in SERVING state on a simulated front-end, for the benchmarks that measure it.

An int8 A(8,4) model (400x8, 26 classes, trained-like random weights) is exported once in a child process
with TensorFlow; the service then serves it on a simulated 8-channel 200 Hz int8 front-end, classifying
every `hop_seconds`. Used by service_memory.py and status_page.py.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devtools/: not installed, beside tinynas

import numpy as np

from firmware_bridge.protocol import Hello
from firmware_bridge.simulator import ArraySource, Simulator
from tinynas.service.paths import request

MODEL = "A(8,4) on 400x8, 26 classes"
EXPORT = """
import sys
from devtools.random_weights import calibration_windows, randomized_model
from tinynas.deploy.export import convert_int8, write_export
from tinynas.space import Architecture
arch = Architecture(400, 8, 26, k=8, c=4)
tflite = convert_int8(randomized_model(arch, 0), calibration_windows(arch, 32, 0))
# What serving reads from a card: the classes and the input (shape and rate) it checks the stream against.
write_export(sys.argv[1], arch, tflite, {"classes": [chr(65 + i) for i in range(26)],
                                         "input": {"shape": [400, 8], "sample_rate_hz": 200.0}})
"""


@dataclass(frozen=True)
class ServingService:
    """The running service: its process, data folder and status address."""

    process: subprocess.Popen
    data: Path
    base_url: str


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serving_service(hop_seconds: float = 0.1, startup_seconds: float = 5.0) -> Iterator[ServingService]:
    """Start the service serving the model; stop it (cleanly) when the block ends."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        model_dir = root / "data" / "profiles" / "bench" / "deployed" / "m1"
        subprocess.run([sys.executable, "-c", EXPORT, str(model_dir)], check=True)
        (root / "data" / "state.json").write_text(json.dumps({
            "state": "SERVING", "user": "bench", "deployed": {
                "user": "bench", "model": str(model_dir / "model.tflite"), "card": str(model_dir / "card.json"),
                "accuracy": 1.0}}))
        stream = np.random.default_rng(0).integers(-100, 100, size=(4000, 8)).astype(np.int8)
        port = _free_port()
        with Simulator(ArraySource(stream), Hello("bench", "1", 8, 200.0, "int8"), port_dir=root / "dev") as sim:
            config = root / "tinynas.toml"
            config.write_text(f'port = "{sim.port}"\ndata_dir = "{root / "data"}"\nhttp_port = {port}\n'
                              f'hop_seconds = {hop_seconds}\n')
            process = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config",
                                        str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(startup_seconds)  # start-up and first predictions
                yield ServingService(process, root / "data", f"http://127.0.0.1:{port}")
            finally:
                request(root / "data", "stop")
                process.wait(30)
