"""The systemd unit that runs the service on a Raspberry Pi: restarted on failure, unprivileged, memory-capped."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from tinynas.errors import UsageError

UNIT_TEMPLATE = """[Unit]
Description=tinynas on-device architecture search and live inference
After=network.target
# Wait for the front-end's USB serial device if it is named here.
Wants=dev-serial.target

[Service]
Type=simple
User={user}
Group={user}
ExecStart={executable} service run --config {config}
Restart=on-failure
RestartSec=5
# Exit 2 is a configuration error (a bad config, another service on data_dir): restarting cannot fix it, a person
# must (without the device the service does not exit: it waits and says so on its page).
RestartPreventExitStatus=2
# The search workers are children of the service: the cap covers them too.
MemoryMax={memory_max}
# Keep the journal and sessions safe on SIGTERM: tinynas stops cleanly within a few seconds.
TimeoutStopSec=60
KillSignal=SIGTERM
NoNewPrivileges=yes
ProtectSystem=full
ReadWritePaths={data_dir}
SupplementaryGroups=dialout

[Install]
WantedBy=multi-user.target
"""


_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_MEMORY = re.compile(r"(\d+[KMGT]?|\d{1,2}%|100%|infinity)")


def _path(value: str, what: str) -> str:
    """A path as the unit may hold it: absolute, no whitespace, quote or control character (nothing that could
    end the line and add a directive, or split ExecStart's arguments)."""
    text = str(value)
    if not text.startswith("/") or any(c.isspace() or c in "\"'\\%$;" or ord(c) < 32 for c in text):
        raise UsageError(f"{what} {text!r} cannot go into a systemd unit: use an absolute path without spaces, "
                         f"quotes, '%', '$' or ';'")
    return text


def unit_text(config_path: str | None, data_dir: str, user: str = "tinynas", memory_max: str = "1536M") -> str:
    """The unit file for `tinynas service run --config CONFIG`; every value checked before it is written."""
    if not config_path:
        raise UsageError("service install needs --config (the unit runs the service with it)")
    if not _USER.fullmatch(user):
        raise UsageError(f"--user {user!r} is not a system user name (lower-case letters, digits, '_' and '-')")
    if not _MEMORY.fullmatch(memory_max):
        raise UsageError(f"--memory-max {memory_max!r}: give bytes with K, M, G or T (1536M), a percentage (50%) "
                         f"or infinity")
    found = shutil.which("tinynas")
    executable = _path(found, "the tinynas executable") if found else \
        f"{_path(sys.executable, 'the Python executable')} -m tinynas.cli"
    return UNIT_TEMPLATE.format(user=user, executable=executable,
                                config=_path(str(Path(config_path).resolve()), "--config"),
                                memory_max=memory_max, data_dir=_path(str(Path(data_dir).resolve()), "data_dir"))
