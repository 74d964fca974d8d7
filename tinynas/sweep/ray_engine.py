"""`tinynas sweep --engine ray`: each cell a Ray task on any node of a cluster, nothing lost when a node dies.

A cell is a whole search (the unit of work), run on the node as the local engine runs it here: a child process
`python -m tinynas.cli search` in a folder on that node's own disk (a journal is SQLite and must never sit on a
network file system). A node never needs the driver's disk: the data files a cell names are shipped through Ray's
object store (once per distinct file or folder), and the search's journal comes back to the driver after every
trial it finishes: the task sends a consistent snapshot (SQLite's backup) to a small actor pinned to the driver's
node (`Keeper`), which writes it into `DIR/cell-NNN/journal.sqlite`, with the folder's files new since the last
send (a trial's weights, which the search exports as they are; at the end the model, card and report). When a node
dies, Ray runs the task again elsewhere (`max_retries`); the new attempt starts from the keeper's copy with the
search's own `--resume`, so at most the candidates that were training are trained again. The driver's own state is
the local engine's `sweep.json`: either engine resumes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import ipaddress
import logging
import os
import re
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tinynas.atomic import atomic_write_bytes
from tinynas.errors import MissingDependencyError, UsageError
from tinynas.folders import JOURNAL, SEARCH_LOG
from tinynas.interrupts import die_with_parent
from tinynas.modes import CellStatus
from tinynas.study.journal import checkpoint, finished_trials, snapshot
from tinynas.sweep.run import Sweep, cell_argv, last_error
from tinynas.sweep.state import FINISHED, Cell, one_line
from tinynas.units import echoed

log = logging.getLogger(__name__)

MAX_RETRIES = 3
"""Times Ray runs a cell's task again after its node or worker died (a search that fails is not retried)."""
SHIPPED = ("data", "test_data", "target")
"""Options whose value may name a file or folder of the driver's, shipped to the node that searches the cell."""


def import_ray():
    """Ray, or one line saying how to get it (an optional extra: the Pi never needs it)."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("--engine ray needs Ray on this machine and on every node: "
                                     "pip install 'tinynas[ray]' (or use the local engine)") from None
    return ray


ADDRESS_TIMEOUT = 5.0
"""Seconds a Ray head has to answer `check_address` (it answers in milliseconds; a port that accepts connections but
never answers, as any server that is not Ray's, would otherwise hold the sweep in Ray's minute of retries)."""
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
"""A DNS label: 1 to 63 letters, digits or hyphens, not starting or ending with a hyphen (an underscore allowed, as
resolvers allow it in host names)."""


def parse_address(address: str) -> tuple[str, int]:
    """The host and port of `HOST:PORT` (an IPv4 address, [an IPv6 address] or a DNS name), checked as text: nothing
    is resolved or connected, and a name that no resolver could take is one line here, not an error of the codec
    deep inside a connection."""
    shown = echoed(address)
    host, colon, port = address.rpartition(":")
    if not colon or not host or not (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536):
        raise UsageError(f"--address must be HOST:PORT of a Ray cluster's head (e.g. 10.0.0.2:6379), got {shown}")
    if host.startswith("[") and host.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(host[1:-1])), int(port)
        except ValueError:
            raise UsageError(f"--address {shown}: {echoed(host)} is not an IPv6 address") from None
    with contextlib.suppress(ValueError):
        return str(ipaddress.IPv4Address(host)), int(port)
    name = host[:-1] if host.endswith(".") else host  # a fully qualified name may end with its root's dot
    if len(name) > 253:
        raise UsageError(f"--address {shown}: a host name of {len(name)} characters, more than DNS allows (253)")
    for label in name.split("."):
        if not label:
            raise UsageError(f"--address {shown}: the host name has an empty label (a dot at its start or two in "
                             f"a row)")
        if not _LABEL.fullmatch(label):
            why = f"{len(label)} characters, more than 63" if len(label) > 63 else "only letters, digits, inner hyphens"
            raise UsageError(f"--address {shown}: {echoed(label)} is not a DNS label of a host name ({why}; an IPv6 "
                             f"address goes in brackets, [::1]:6379)")
    return host, int(port)


def check_address_text(address: str) -> tuple[str, int]:
    """A cluster's address as text (`parse_address`), and not a Ray Client's `ray://`: one line before Ray is even
    imported."""
    if address.startswith("ray://"):
        raise UsageError(f"--address {echoed(address)}: Ray Client addresses (ray://) are not supported: run the sweep "
                         f"on a node of the cluster with its GCS address (HOST:PORT, e.g. 10.0.0.2:6379)")
    return parse_address(address)


def check_address(address: str | None, timeout: float | None = None) -> None:
    """A `HOST:PORT` that is not a Ray cluster's head is one line within `timeout` seconds (None: ADDRESS_TIMEOUT),
    before anything is written: not Ray's minute of retries and its log (a port that accepts connections but is not
    Ray's held the sweep for ever). The head is asked for its cluster's id, as Ray's own clients first ask it (a gRPC
    call with a deadline): nobody there, a name that does not resolve, a server that never answers or answers in
    another protocol are each one line."""
    if address in (None, "auto", "local"):
        return
    host, port = check_address_text(address)
    timeout = ADDRESS_TIMEOUT if timeout is None else timeout
    try:  # Ray's own gRPC and its generated stubs (installed with it; untyped, so reached as modules)
        grpc = importlib.import_module("grpc")
        gcs_service_pb2 = importlib.import_module("ray.core.generated.gcs_service_pb2")
        gcs_service_pb2_grpc = importlib.import_module("ray.core.generated.gcs_service_pb2_grpc")
    except ImportError:  # a Ray without its generated stubs: a plain connection is the check left
        _connect(address, host, port, timeout)
        return
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    # No proxy: Ray's own clients do not take one, and a proxy's answer is not the head's.
    with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
        try:
            gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(gcs_service_pb2.GetClusterIdRequest(),
                                                                              timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                return  # a head that wants a token answered: Ray's own connection says what it needs
            details = str(exc.details() if callable(getattr(exc, "details", None)) else exc).lower()
            raise _unanswered(address, code == grpc.StatusCode.UNAVAILABLE, code == grpc.StatusCode.DEADLINE_EXCEEDED,
                              details, timeout) from None


def _unanswered(address: str, unavailable: bool, late: bool, details: str, timeout: float) -> UsageError:
    """The one line for a gRPC call the head did not answer (`address` already checked as text: printed as given)."""
    reason = next((words for key, words in (("refused", "connection refused"), ("resolv", "no such host"),
                                            ("not found", "no such host"), ("unreachable", "unreachable"))
                   if key in details), None)
    if unavailable and reason:
        return UsageError(f"--address {address}: no Ray cluster answers there ({reason}): start one with "
                          f"`ray start --head`, or leave --address out to start one on this machine")
    what = f"nothing answered within {timeout:g} s" if late else "something answered, but not as Ray's head does"
    return UsageError(f"--address {address}: no Ray head answered at that address ({what}): give the head's GCS port "
                      f"(`ray start --head` says it; 6379 unless --port chose another)")


def _connect(address: str, host: str, port: int, timeout: float) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise UsageError(f"--address {address}: no Ray cluster answers there ({reason}): start one with "
                         f"`ray start --head`, or leave --address out to start one on this machine") from None


class Keeper:
    """Lives on the driver's node and keeps each cell's journal and log on the driver's disk, as the tasks send them.

    An attempt older than the newest begun for its cell (a task Ray has given up on) is not listened to."""

    def __init__(self, out: str, attempts: dict[int, int]) -> None:
        self.out, self.attempts = Path(out), dict(attempts)
        self.state: dict[int, dict[str, Any]] = {}
        self.logs: dict[int, dict[int, bytes]] = {}

    def _folder(self, index: int) -> Path:
        folder = self.out / f"cell-{index:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def begin(self, index: int, node: str) -> tuple[int, bytes | None, dict[str, bytes]]:
        """A new attempt at a cell on `node`: its number, the journal it resumes (None: a new search) and the
        cell's other files kept so far (a trial's weights, the split: what the search's --resume reads)."""
        attempt = self.attempts.get(index, 0) + 1
        self.attempts[index] = attempt
        folder = self._folder(index)
        # A driver killed while this actor wrote leaves the writes' temporary files (`.NAME.XXXX.tmp`): not the
        # cell's files, never read; removed before they could travel to a node.
        for stale in folder.rglob(".*.tmp"):
            stale.unlink(missing_ok=True)
        if attempt == 1 or index not in self.logs:  # the log of earlier drivers' attempts stays at its head
            self.logs[index] = {0: (folder / SEARCH_LOG).read_bytes() if (folder / SEARCH_LOG).exists() else b""}
        self.state[index] = {"attempt": attempt, "node": node, "trials": 0, "resumes": 0}
        journal = folder / JOURNAL
        if not journal.exists():
            return attempt, None, {}
        copy = snapshot(journal)
        self.state[index]["resumes"] = finished_trials(copy)
        # A killed local run's write-ahead log folded into the file, so that a snapshot renamed over the file later
        # finds no stale -wal beside it to replay.
        checkpoint(journal)
        return attempt, copy, {name: (folder / name).read_bytes() for name in _files(folder)}

    def keep(self, index: int, attempt: int, journal: bytes | None, files: dict[str, bytes], gone: list[str],
             log_bytes: bytes, trials: int) -> bool:
        """Write what attempt `attempt` sent of its cell (its journal, the files new or changed since it last sent,
        those the search removed since, its log); False, and nothing written, when Ray has started a newer
        attempt."""
        if attempt != self.attempts.get(index):
            return False
        folder = self._folder(index)
        for name in gone:  # e.g. a file the search keeps only while it works
            if _travels(name):
                (folder / name).unlink(missing_ok=True)
        for name, data in files.items():
            if _travels(name):
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(folder / name, data)
        if journal is not None:  # last: the journal never names a trial whose weights are not here yet
            atomic_write_bytes(folder / JOURNAL, journal)
        self.logs[index][attempt] = (f"--- attempt {attempt} on node {self.state[index]['node'][:8]} ---\n"
                                     .encode() + log_bytes)
        atomic_write_bytes(folder / SEARCH_LOG, b"".join(self.logs[index][key] for key in sorted(self.logs[index])))
        self.state[index]["trials"] = trials
        return True

    def status(self) -> dict[int, dict[str, Any]]:
        return {index: dict(state) for index, state in self.state.items()}


def _files(folder: Path) -> list[str]:
    """A cell folder's files that travel between node and driver (as relative names): all but the journal and its
    SQLite companions, the log (each sent its own way) and half-written files."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*")
                  if path.is_file() and _travels(str(path.relative_to(folder))))


def _travels(name: str) -> bool:
    """Whether a file of that relative name goes between a node's cell folder and the driver's: no path leaves the
    folder, and the journal is only ever written whole, from its snapshot."""
    parts = Path(name).parts
    return not (not parts or Path(name).is_absolute() or ".." in parts or parts[0].startswith(JOURNAL)
                or name == SEARCH_LOG or ".partial" in parts[-1] or parts[-1].startswith("."))


class _Sender:
    """The node's side of the mirror: what changed in the cell's folder since the last send."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sent: dict[str, tuple[int, int]] = {}

    def changed(self) -> tuple[dict[str, bytes], list[str]]:
        """The files new or changed since the last call, and the names sent before that are gone now."""
        out = {}
        names = _files(self.folder)
        gone = sorted(set(self.sent) - set(names))
        for name in gone:
            del self.sent[name]
        for name in names:
            stamp = _stat(self.folder / name)
            if self.sent.get(name) != stamp:
                try:
                    out[name] = (self.folder / name).read_bytes()
                except OSError:  # replaced as we looked: sent next time
                    continue
                self.sent[name] = stamp
        return out, gone


def _pack(path: Path) -> bytes:
    """A tar of a file or folder under its own name (data shipped to the nodes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(path, arcname=path.name)
    return buffer.getvalue()


def _unpack(packed: bytes, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(packed)) as tar:
        tar.extractall(into, filter="data")  # a tar of ours, still read as if it were not: no path leaves `into`


def _shipped_path(value: str) -> tuple[str, Path, str] | None:
    """`(prefix, path, suffix)` when an option's value names an existing file or folder here: a data spec
    `source:PATH?query`, or a bare path (a target's .toml)."""
    prefix, _, rest = value.partition(":") if ":" in value and not os.path.exists(value) else ("", "", value)
    if prefix == "synthetic":
        return None
    path, mark, query = rest.partition("?")
    if path and os.path.exists(path):
        return (f"{prefix}:" if prefix else ""), Path(path).resolve(), mark + query
    return None


def _place(packed: bytes, digest: str, name: str) -> Path:
    """Unpack a shipped file or folder once per node (a folder named by its content), and say where it is."""
    home = Path(tempfile.gettempdir()) / f"tinynas-shipped-{digest[:16]}"
    if not home.exists():
        staging = Path(tempfile.mkdtemp(prefix="tinynas-shipping-"))
        _unpack(packed, staging)
        try:
            staging.rename(home)
        except OSError:  # another task on this node placed it first
            pass
    return home / name


def _search_task(index: int, options: dict[str, Any], shipped: dict[str, tuple[Any, str, str, str, str]],
                 keeper, command: tuple[str, ...] | None) -> dict[str, Any]:
    """Search one cell on this node with the sweep's `command` (`Sweep.command`); runs inside a Ray worker."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    attempt, journal, files = _wait(keeper.begin.remote(index, node))
    for key, (packed_ref, digest, name, prefix, suffix) in shipped.items():
        options[key] = f"{prefix}{_place(_wait(packed_ref), digest, name)}{suffix}"
    with tempfile.TemporaryDirectory(prefix=f"tinynas-cell-{index:03d}-") as scratch:
        folder = Path(scratch) / "cell"
        folder.mkdir()
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        if journal is not None:
            (folder / JOURNAL).write_bytes(journal)
        sender = _Sender(folder)
        sender.changed()  # what came from the driver needs no sending back

        def send(trials: bool = True) -> None:
            copy = snapshot(folder / JOURNAL) if (folder / JOURNAL).exists() else None
            files, gone = sender.changed()
            _wait(keeper.keep.remote(index, attempt, copy, files, gone, (folder / SEARCH_LOG).read_bytes(),
                                     finished_trials(copy) if copy and trials else 0))

        argv = cell_argv(command, options, folder, journal is not None)
        started = time.monotonic()
        with open(folder / SEARCH_LOG, "ab") as log_file:
            process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, preexec_fn=die_with_parent,
                                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
            seen: tuple = ()
            try:
                while True:
                    ended = process.poll() is not None
                    stamp = (_stat(folder / JOURNAL), _stat(folder / f"{JOURNAL}-wal"))
                    if stamp != seen or ended:  # a trial finished (or the search ended): the folder goes back
                        seen = stamp
                        send()
                    if ended:
                        break
                    time.sleep(1.0)
            except KeyboardInterrupt:  # ray.cancel: the search stops as on its own Ctrl-C, its journal whole
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                send(trials=False)
                raise
        return {"returncode": process.returncode, "seconds": time.monotonic() - started, "node": node,
                "attempt": attempt, "error": last_error(folder / SEARCH_LOG) if process.returncode else ""}


def _wait(ref) -> Any:
    """An object's value, waited for as a plain future: `ray.get` in a task hands its CPUs back to Ray while it
    waits, and Ray would start another cell's search on them beside this one."""
    return ref.future().result()


def _stat(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
    except OSError:
        return (0, 0)
    return info.st_mtime_ns, info.st_size


def cpus_of(options: dict[str, Any]) -> int:
    """A cell's CPUs on its node: its workers times their threads (`workers = auto` is one: Ray decides how many
    cells share a node, so a search must not also take every core it sees)."""
    workers = options.get("workers", "auto")
    workers = 1 if str(workers) == "auto" else int(workers)
    return workers * int(options.get("threads", 1))


def run_on_ray(sweep: Sweep, address: str | None = None, progress: Callable[[str], None] = log.info) -> None:
    """Search every cell of `sweep` not finished yet as Ray tasks on the cluster at `address` (None: a Ray
    started on this machine for the sweep). Ctrl-C stops the running searches, their journals whole."""
    ray = import_ray()
    check_address(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                 configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:  # e.g. a port that answers but is not Ray's
        where = f"the Ray cluster at {address}" if address else "a Ray on this machine"
        raise UsageError(f"cannot join {where}: {str(exc).splitlines()[0][:200]}") from None
    refs: dict[Any, Cell] = {}
    try:
        here = ray.get_runtime_context().get_node_id()
        keeper = ray.remote(Keeper).options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)).remote(
            str(sweep.out.resolve()), {cell.index: cell.attempts for cell in sweep.cells})
        task = ray.remote(_search_task)
        packed: dict[Path, tuple[Any, str]] = {}
        waiting = sweep.unfinished()
        cpus: list[int] = []
        for cell in waiting:
            options = {**sweep.grid.fixed, **cell.values}
            if str(options.get("workers", "auto")) == "auto":
                options["workers"] = 1
            shipped = {}
            for key in SHIPPED:
                found = _shipped_path(str(options[key])) if key in options else None
                if found is None:
                    continue
                prefix, path, suffix = found
                if path not in packed:
                    data = _pack(path)
                    packed[path] = (ray.put(data), hashlib.sha256(data).hexdigest())
                ref, digest = packed[path]
                shipped[key] = (ref, digest, path.name, prefix, suffix)
            cpus.append(cpus_of(options))
            refs[task.options(num_cpus=cpus[-1], max_retries=MAX_RETRIES, retry_exceptions=False).remote(
                cell.index, options, shipped, keeper, sweep.command)] = cell
        at_once = max(1, int(ray.cluster_resources().get("CPU", 1)) // min(cpus, default=1))  # for the time left
        progress(f"{len(waiting)} cells sent to Ray ({len(ray.nodes())} nodes, "
                 f"{ray.cluster_resources().get('CPU', 0):.0f} CPUs)")
        attempts_seen = {cell.index: cell.attempts for cell in sweep.cells}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=1.0)
            for index, state in ray.get(keeper.status.remote()).items():
                cell = sweep.cells[index - 1]
                if state["attempt"] > attempts_seen.get(index, 0) and cell.status not in FINISHED:
                    attempts_seen[index] = state["attempt"]
                    again = "" if state["attempt"] == 1 else f", attempt {state['attempt']}"
                    resumes = f", resuming {state['resumes']} trials" if state["resumes"] else ""
                    cell.status, cell.attempts, cell.node = CellStatus.RUNNING, state["attempt"], state["node"]
                    sweep.save()
                    progress(f"cell {cell.index}/{len(sweep.cells)} started on node {cell.node[:8]}{again}{resumes} "
                             f"({cell.describe()})")
            for ref in ready:
                cell = refs.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    status, error = CellStatus.FAILED, f"Ray lost the cell's search: {one_line(str(exc).strip(), 200)}"
                else:
                    cell.seconds = round(cell.seconds + result["seconds"], 1)
                    cell.node, cell.attempts = result["node"], result["attempt"]
                    status, error = ((CellStatus.DONE, "") if result["returncode"] == 0 else
                                     (CellStatus.FAILED, result["error"]))
                progress(sweep.finish(cell, status, error, left=len(refs), at_once=at_once))
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref)
        for ref, cell in refs.items():
            with contextlib.suppress(Exception):
                ray.get(ref, timeout=90)
            cell.status = CellStatus.RUNNING if cell.attempts else CellStatus.PENDING
        sweep.save()
        raise
    finally:
        ray.shutdown()
