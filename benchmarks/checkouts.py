"""Run the same child script against two checkouts, for the benchmarks that compare this one with another.

Each call runs `code` in a fresh interpreter whose `PYTHONPATH` is the checkout, from a scratch folder (so the
checkout's own files are the only tinynas it can import), and returns the JSON object its last stdout line
printed. Used by worker_start.py and status_request.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def run_child(checkout: Path, code: str, *args: str, caller: str) -> dict:
    """`code` run in a fresh interpreter on `checkout` with `args`; its last stdout line read as JSON."""
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "child.py"
        script.write_text(code)
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        done = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True,
                              cwd=scratch)
    if done.returncode:
        raise SystemExit(f"{caller}: the run with {checkout} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def short_commit(checkout: Path) -> str:
    """The checkout's HEAD, abbreviated, for the results file."""
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
