"""Loopback helpers for tests that start servers."""

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
