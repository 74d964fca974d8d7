"""The systemd unit that runs the service on a Raspberry Pi: restarted on failure, unprivileged, memory-capped."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

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


def unit_text(config_path: str, data_dir: str, user: str = "tinynas", memory_max: str = "1536M") -> str:
    """The unit file for `tinynas service run --config CONFIG`."""
    executable = shutil.which("tinynas") or f"{sys.executable} -m tinynas.cli"
    return UNIT_TEMPLATE.format(user=user, executable=executable, config=Path(config_path).resolve(),
                                memory_max=memory_max, data_dir=data_dir)
