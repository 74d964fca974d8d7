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


def as_other_user(action):
    """Run `action()` in a forked child as user `nobody`, returning (error class name, message) or
    (None, repr(result)).

    Tests run as root, who may read any file: permission errors only happen to other users, so the
    child drops to one (the fork keeps the imported modules, so no interpreter has to be found).
    Callers must make the test's folder traversable (mode 0o755).
    """
    import os
    import pickle

    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(reader)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            try:
                outcome = (None, repr(action()))
            except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
                outcome = (type(exc).__name__, str(exc))
            os.write(writer, pickle.dumps(outcome))
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


def linked_mat_folder(folder, *sources):
    """A new folder holding links to every .mat file of `sources` (e.g. two loads' folders; nothing copied)."""
    folder.mkdir()
    for source in sources:
        for file in source.glob("*.mat"):
            (folder / file.name).symlink_to(file)
    return folder
