"""Resident memory of a process, read from /proc (Linux): reported by workers, the study and the service."""

from __future__ import annotations


def memory_bytes(pid: int | str = "self") -> dict[str, int]:
    """Resident memory of a process from /proc (Linux): rss, private (anonymous) and file-backed."""
    fields = {"VmRSS": "rss", "RssAnon": "private", "RssFile": "file"}
    found = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in fields:
                    found[fields[key]] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return found
