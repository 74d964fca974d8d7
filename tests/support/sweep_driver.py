"""The real `tinynas sweep` command with another cell command (`Sweep.command`, e.g. stand_in_search.py): the CLI's
checks, progress, state and table unchanged, only the program each cell runs replaced.

    python sweep_driver.py COMMAND_JSON sweep GRID.toml --out DIR ...

COMMAND_JSON is the cell command as a JSON list of strings. Run as a script by its path."""

from __future__ import annotations

import json
import sys

from tinynas.cli import main
from tinynas.sweep.run import Sweep

if __name__ == "__main__":
    Sweep.command = tuple(json.loads(sys.argv[1]))  # for every sweep this process makes: the CLI makes one
    sys.exit(main(sys.argv[2:]))
