"""`--workers auto`: the count follows the cores and the memory, read from /proc and the cgroup."""

import pytest

from tinynas.machine import (
    MIN_PRIVATE_BYTES,
    SHARED_LIBRARY_BYTES,
    WORKER_PRIVATE_BYTES,
    _cgroup_room,
    auto_workers,
    available_memory,
)

GIB = 2**30


@pytest.mark.parametrize("cores, available_gib, expected", [
    (4, 0.8, 1),   # a 1 GB Raspberry Pi 4: one worker
    (4, 1.7, 1),   # 2 GB: room for one worker's compiled programs, not two
    (4, 2.4, 2),
    (4, 3.4, 3),   # 4 GB: all but one core (recording and serving keep one)
    (4, 7.0, 3),   # 8 GB: still one core left over
    (2, 20.0, 2),  # two cores are both used (the study's loop mostly sleeps)
    (1, 20.0, 1),
    (8, 0.1, 1),   # never zero: one worker is the least a search can run with
])
def test_auto_workers_follows_cores_and_memory(cores, available_gib, expected):
    chosen = auto_workers(cores, int(available_gib * GIB))
    assert chosen.workers == expected
    text = chosen.describe()
    assert text.startswith(f"{expected} worker") and f"{cores} core" in text and f"{available_gib:.1f} GiB" in text
    assert MIN_PRIVATE_BYTES <= chosen.private_limit_bytes <= WORKER_PRIVATE_BYTES
    assert f"{chosen.private_limit_bytes >> 20} MiB" in text


def test_a_small_board_recycles_its_worker_sooner():
    """On a 1 GB board the lone worker gets what there is, not the default limit the board cannot hold."""
    small = auto_workers(4, int(0.8 * GIB))
    assert small.workers == 1 and small.private_limit_bytes < WORKER_PRIVATE_BYTES
    assert auto_workers(4, 16 * GIB).private_limit_bytes == WORKER_PRIVATE_BYTES


def test_auto_workers_without_a_memory_figure_uses_the_cores():
    assert auto_workers(4, None).workers == 3
    assert "memory unknown" in auto_workers(4, None).describe()


def test_each_more_worker_needs_its_private_memory():
    base = int((SHARED_LIBRARY_BYTES + 2 * WORKER_PRIVATE_BYTES) / 0.8) + 1
    assert auto_workers(16, base).workers == 2
    assert auto_workers(16, base - WORKER_PRIVATE_BYTES).workers == 1


def test_available_memory_reads_meminfo_and_the_cgroup_limit(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  4000000 kB\nMemFree:  100 kB\nMemAvailable:  3000000 kB\n")
    assert available_memory(meminfo, tmp_path / "no-cgroup") == 3000000 * 1024
    # cgroup v2: the unit's MemoryMax minus what the group uses already
    membership = tmp_path / "cgroup"
    membership.write_text("0::/system.slice/tinynas.service\n")
    group = tmp_path / "fs" / "system.slice" / "tinynas.service"
    group.mkdir(parents=True)
    (group / "memory.max").write_text(f"{1536 * 2**20}\n")
    (group / "memory.current").write_text(f"{200 * 2**20}\n")
    assert _cgroup_room(tmp_path / "fs", membership) == 1336 * 2**20
    (group / "memory.max").write_text("max\n")
    assert _cgroup_room(tmp_path / "fs", membership) is None
    # cgroup v1: the memory controller's own tree; "no limit" is a huge number
    membership.write_text("4:memory:/docker/abc\n0::/\n")
    v1 = tmp_path / "fs" / "memory" / "docker" / "abc"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text(f"{GIB}\n")
    (v1 / "memory.usage_in_bytes").write_text(f"{GIB // 4}\n")
    assert _cgroup_room(tmp_path / "fs", membership) == GIB - GIB // 4
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert _cgroup_room(tmp_path / "fs", membership) is None
    assert _cgroup_room(tmp_path / "fs", tmp_path / "missing") is None


def test_available_memory_takes_the_smaller_of_meminfo_and_cgroup(tmp_path, monkeypatch):
    import tinynas.machine as machine

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemAvailable:  3000000 kB\n")
    monkeypatch.setattr(machine, "_cgroup_room", lambda root: 500 * 2**20)
    assert available_memory(meminfo) == 500 * 2**20
    monkeypatch.setattr(machine, "_cgroup_room", lambda root: None)
    assert available_memory(meminfo) == 3000000 * 1024
    assert available_memory(tmp_path / "nothing") is None
