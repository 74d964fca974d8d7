"""Writers of small data files in the published formats, for tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def write_isl_recording(path: Path, emg, stamp: str, imu: bool = True) -> None:
    """One file in the published ISL JSON format."""
    record = {"timestamp": stamp, "duration": 2000,
              "emg": {"frequency": 200, "data": np.asarray(emg).astype(int).tolist()}}
    if imu:
        record["imu"] = {"frequency": 200, "data": [
            {"gyroscope": [0.1, 0.2, 0.3], "acceleration": [0.0, 0.0, 1.0], "orientation": [1.0, 0.0, 0.0, 0.0]}
        ] * len(emg)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
