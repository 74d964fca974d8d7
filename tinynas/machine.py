"""What this machine can give a search: usable cores, available memory, and `--workers auto`.

A worker is a process that imports TensorFlow and trains one candidate at a time on one core. Its
memory, measured: ~240 MiB of its own after TensorFlow's import, growing by ~30 MiB per candidate as XLA
keeps each compiled program (`tinynas.study.pool` recycles a worker past its private limit), plus ~400 MiB
of TensorFlow's shared library pages, which every worker maps from the same files, so they count once
(benchmarks/results/search_resources.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

WORKER_PRIVATE_BYTES = 600 << 20
"""Memory each worker may use of its own: the pool's default private limit (`tinynas.study.pool`)."""
MIN_PRIVATE_BYTES = 360 << 20
"""The least private limit worth running a worker with: TensorFlow's import and two or three candidates."""
SHARED_LIBRARY_BYTES = 400 << 20
"""TensorFlow's library pages, resident once for all workers (measured 403 MiB)."""
HEADROOM = 0.8
"""Share of the available memory the workers may plan on: the rest absorbs peaks (the final export,
page cache the kernel would otherwise have to drop)."""


@dataclass(frozen=True)
class AutoWorkers:
    """The worker count `auto` chose, and why."""

    workers: int
    cores: int
    available_bytes: int | None
    private_limit_bytes: int = WORKER_PRIVATE_BYTES
    """Recycle a worker past this much private memory: less than the default where memory is short."""

    def describe(self) -> str:
        memory = ("memory unknown" if self.available_bytes is None
                  else f"{self.available_bytes / 2**30:.1f} GiB available")
        return (f"{self.workers} worker{'s' if self.workers != 1 else ''} (auto: {self.cores} core"
                f"{'s' if self.cores != 1 else ''}, {memory}; each recycled past "
                f"{self.private_limit_bytes >> 20} MiB of its own)")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. a container's or systemd's CPU set)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _meminfo_available(path: Path) -> int | None:
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room(root: Path, membership: Path = Path("/proc/self/cgroup")) -> int | None:
    """Memory left under this process's cgroup limit (systemd's MemoryMax, a container's limit), cgroup v2
    or v1; None if there is no limit or it cannot be read."""
    try:
        lines = membership.read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and not controllers:
            limit, usage = root / path.lstrip("/") / "memory.max", root / path.lstrip("/") / "memory.current"
        elif "memory" in controllers.split(","):
            group = root / "memory" / path.lstrip("/")
            limit, usage = group / "memory.limit_in_bytes", group / "memory.usage_in_bytes"
        else:
            continue
        try:
            text = limit.read_text(encoding="ascii").strip()
            if text == "max" or int(text) >= 1 << 60:  # v1 writes "no limit" as a huge number
                continue
            return max(0, int(text) - int(usage.read_text(encoding="ascii").strip()))
        except (OSError, ValueError):
            continue
    return None


def available_memory(meminfo: Path = Path("/proc/meminfo"), cgroup_root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes a new process could use without swapping: the kernel's MemAvailable, or less if this
    process's cgroup (e.g. the service's MemoryMax) leaves less. None where neither is readable."""
    values = [v for v in (_meminfo_available(meminfo), _cgroup_room(cgroup_root)) if v is not None]
    return min(values) if values else None


def auto_workers(cores: int | None = None, available_bytes: int | None | str = "measure") -> AutoWorkers:
    """How many training workers to run: one per core, but on more than two cores one is left for the
    rest (the study's loop, the service's recording and serving), and no more than the memory holds.

    A 1 GB Raspberry Pi gets 1, a 2 GB one 1-2, a 4 GB one 3 (4 cores, one left over)."""
    cores = usable_cores() if cores is None else max(1, cores)
    available = available_memory() if available_bytes == "measure" else available_bytes
    assert not isinstance(available, str)
    by_cores = cores if cores <= 2 else cores - 1
    if available is None:
        return AutoWorkers(by_cores, cores, None)
    room = int(available * HEADROOM) - SHARED_LIBRARY_BYTES
    workers = min(by_cores, max(1, room // WORKER_PRIVATE_BYTES))
    # A lone worker on a small board gets what there is (recycled sooner), not more than the board holds.
    limit = max(MIN_PRIVATE_BYTES, min(WORKER_PRIVATE_BYTES, room // workers))
    return AutoWorkers(workers, cores, available, limit)
