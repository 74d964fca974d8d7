"""Opening a port in a Python whose sensor library is not the one installed here: what a Raspberry Pi meets when a
wheel carries no library for its machine (tests/firmware_bridge/test_brainflow_link.py, test_lsl_link.py)."""

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def open_with_changed_package(tmp_path: Path, package, change: Callable[[Path], None], url: str) -> list[str]:
    """`link_for_url(url)` in a fresh Python whose `package` is a copy under `tmp_path` that `change` altered; the lines
    it printed (the LinkError's text, or nothing)."""
    copy = tmp_path / Path(package.__file__).parent.name
    shutil.copytree(Path(package.__file__).parent, copy)
    change(copy)
    code = ("from firmware_bridge.link import link_for_url\n"
            "from firmware_bridge.link import LinkError\n"
            f"try:\n    link_for_url({url!r})\nexcept LinkError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"})
    return done.stdout.strip().splitlines() or [f"(nothing printed; stderr: {done.stderr[-500:]})"]
