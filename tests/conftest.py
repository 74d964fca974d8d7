"""Shared fixtures: a tiny trained model, built once per test session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Property tests see the same inputs on every run (CI must not pass or fail by chance); set
# TINYNAS_FUZZ_RANDOM=1 to explore new inputs locally. Explicit @settings add to this profile.
settings.register_profile("tinynas", derandomize=not os.environ.get("TINYNAS_FUZZ_RANDOM"), database=None)
settings.load_profile("tinynas")

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

LONGEST_FIRST = ("tests/service/test_rewear.py", "tests/service/test_anomaly_service.py",
                 "tests/service/test_two_users.py", "tests/service/test_service.py", "tests/service/test_input_",
                 "tests/service/test_anomaly_conditions_service.py",
                 "tests/sweep/test_sweep_ray.py", "tests/study/test_study.py", "tests/deploy/test_evaluate.py",
                 "tests/adaptation/", "tests/test_boundary.py", "tests/deploy/test_c_codegen.py")
"""The files that take longest (`--durations` in CI: a real service with a simulated person, real searches)."""


def pytest_collection_modifyitems(items):
    # pytest-xdist (`-n 2` or `-n 3`, `--dist loadfile`) hands whole files to its workers in collection order: the
    # longest go first, so that no worker starts one of them when the others have finished everything else. A
    # stable sort: each file's tests keep their order.
    def rank(item) -> int:
        return next((i for i, start in enumerate(LONGEST_FIRST) if item.nodeid.startswith(start)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)
    # A real search and an emulated board: the slow tier.
    for item in items:
        if "hil_model" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


CLI_TIMEOUT = 600
"""Seconds a command run in-process may take before the worker ends with every thread's stack (a hang)."""


@pytest.fixture
def cli_in_process(capfd, monkeypatch):
    """`cli_in_process(*args, cwd=None)`: `tinynas ARGS` run through `tinynas.cli.main` in this process, as a
    CompletedProcess (returncode, stdout, stderr captured at the file descriptors).

    A fresh interpreter per command costs about a second; tables of bad input run hundreds. The console entry's
    `logging.basicConfig` does nothing under pytest (its capture handler is on the root logger already): the
    same stderr handler is put there for the call, so that a stray log line fails a one-line check as it would
    for a user. A command that hangs ends the worker with every thread's stack (faulthandler) after CLI_TIMEOUT,
    as a subprocess's timeout would, instead of hanging the suite."""
    import faulthandler
    import logging
    import subprocess
    import sys

    from tinynas.cli import main

    def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capfd.readouterr()  # what came before is not the command's
        root = logging.getLogger()
        handler = logging.StreamHandler(sys.stderr)  # sys.stderr is capfd's here
        level = root.level
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        faulthandler.dump_traceback_later(CLI_TIMEOUT, exit=True)
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's usage errors leave this way, as from the console entry
            code = 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 1
        finally:
            faulthandler.cancel_dump_traceback_later()
            root.removeHandler(handler)
            root.setLevel(level)
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return run


@pytest.fixture(scope="session")
def tflite_micro():
    """Skip the requesting test when tflite-micro (x86_64-only pre-release) is not installed."""
    from tinynas.deploy.measure import tflite_micro_available

    if not tflite_micro_available():
        pytest.skip("tflite-micro is not installed (pip install --pre tflite-micro)")


@pytest.fixture(scope="session")
def c_compiler() -> str:
    """Path of a C compiler, or skip."""
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no C compiler (cc) on PATH")


@pytest.fixture(scope="session")
def arm_toolchain() -> None:
    """The Arm cross-compiler, picolibc and QEMU: skip without them, but fail in CI, where devtools/test.sh installs
    them."""
    from devtools.emulate import missing_tools

    missing = missing_tools()
    if missing:
        message = f"{', '.join(missing)} missing (devtools/test.sh installs them with apt-get as root)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def vibration_split():
    """Small synthetic vibration set, split by recording 60/20/20 per class."""
    from tinynas.data.splits import group_split
    from tinynas.data.synthetic import vibration

    data = vibration(windows_per_class=40, seed=3)
    split = group_split(data, (0.6, 0.2, 0.2), seed=3)
    return data, split.train, split.val, split.test


@pytest.fixture(scope="session")
def trained_tiny(vibration_split):
    """A(3,3) trained for a few epochs on the synthetic vibration set."""
    from tinynas.space import Architecture
    from tinynas.training.train import fit
    from tinynas.trial import Fidelity

    data, train, val, _ = vibration_split
    arch = Architecture(512, 1, len(data.class_names), k=3, c=3)
    result = fit(arch, data.x[train], data.y[train], data.x[val], data.y[val],
                 Fidelity(epochs=12, batch_size=16, learning_rate=3e-3), seed=0)
    return arch, result


@pytest.fixture(scope="session")
def exported_tiny(trained_tiny, vibration_split, tmp_path_factory):
    """The tiny trained model converted to int8 and written with its C array and card."""
    from tinynas.deploy.export import convert_int8, write_export

    arch, result = trained_tiny
    data, train, _, _ = vibration_split
    tflite = convert_int8(result.model, data.x[train])
    out = tmp_path_factory.mktemp("export")
    # What a served or downloaded model's card must say at least (classes, input): the readers check it whole.
    card = {"note": "test", "classes": list(data.class_names),
            "input": {"shape": [data.window_length, data.channels], "sample_rate_hz": data.sample_rate_hz}}
    paths = write_export(out, arch, tflite, card)
    return arch, tflite, paths


@pytest.fixture(scope="session")
def built_once(tmp_path_factory):
    """`built_once(name, build)`: the folder `name`, made by `build(folder)` once per test run, however many
    pytest-xdist workers ask for it (`_built_once`)."""
    return lambda name, build: _built_once(tmp_path_factory, name, build)


def _built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder `name`, made by `build(folder)` once per test run, however many pytest-xdist workers ask for it.

    A session fixture runs once per worker: an expensive one (a real search) would run on every core at once and
    slow each. The first worker builds under a lock in the run's shared temporary folder, the others wait and
    read it; the folder is only read afterwards (a test that changes it works on a copy)."""
    import fcntl

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # one process: its own temporary folder
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    root = tmp_path_factory.getbasetemp().parent  # shared by the workers of this run
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".built").is_file():
            if folder.exists():  # a worker that failed half-way: start again
                shutil.rmtree(folder)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


def _tmpfs(options: str, prefix: str):
    """A real tmpfs mounted with `options` (root only); fails in CI, where .ci/run runs as root, else skips."""
    import subprocess
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        folder.rmdir()
        reason = f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)
        folder.rmdir()


@pytest.fixture
def small_disk():
    """A real 4 MiB file system, to fill up (a full disk is not simulated)."""
    yield from _tmpfs("size=4m", "tinynas-full-")


@pytest.fixture
def read_only_mount():
    """A real read-only file system; root ignores folder permissions, not this."""
    yield from _tmpfs("ro,size=1m", "tinynas-ro-")


@pytest.fixture(scope="session")
def hil_model(built_once):
    """A real search's model folder (generated C runtime, test windows kept) for the model-on-a-chip tests
    (tests/support/searched.py: "hil")."""
    from tests.support.searched import finished

    return finished("hil", built_once)


def _searches_under(root: Path) -> dict[tuple, str]:
    """The real searches whose journals lie under `root` (a candidate trained to the end by TensorFlow: its weights
    kept beside the journal), one per search: a folder copied from a finished one (a shared fixture's) holds the same
    journal and is not counted again."""
    import contextlib
    import sqlite3

    from tinynas.folders import WEIGHTS_DIR

    found: dict[tuple, str] = {}
    for journal in sorted(root.rglob("journal.sqlite")):
        if journal.is_symlink() or not journal.is_file():  # the bad-input tests' pipes and links: never opened
            continue
        if not any((journal.parent / WEIGHTS_DIR).glob("*.h5")):  # a scripted pool's journal: nothing trained
            continue
        try:
            with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as db:
                trained = db.execute("SELECT MIN(updated) FROM trials WHERE state = 'complete'").fetchone()[0]
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.Error:
            continue
        if trained is not None:
            key = (trained, meta.get("settings"), meta.get("search_seconds"))
            found.setdefault(key, str(journal.relative_to(root)).split("/")[1 if journal.parts else 0])
    return found


def pytest_terminal_summary(terminalreporter, config):
    """How many real searches this run made (docs/development.md keeps the count per tier: issue 69's rule is
    none in the fast tier). Counted from the journals left under pytest's temporary folders."""
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None or hasattr(config, "workerinput"):
        return
    searches = _searches_under(factory.getbasetemp())
    where = sorted({name.split("popen-")[-1] for name in searches.values()})
    terminalreporter.write_line(f"real searches in this run: {len(searches)}"
                                + (f" (in {', '.join(where)[:300]})" if where else ""))
