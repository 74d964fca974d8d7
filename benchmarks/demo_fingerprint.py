"""What `tinynas demo --seed 0` decided and measured, as comparable JSON: a refactoring must not change it.

Reads a finished demo (or any search) folder and keeps what is deterministic per seed: every journal row
(architecture, fidelity, state, score, per-epoch validation curves, costs, violations, attempts) and the
card's figures (winner, accuracies, flash, cost estimate, search counts). Timings, memory, paths and tool
versions are left out: they differ between runs of the same code.

    python benchmarks/demo_fingerprint.py FOLDER > fingerprint.json
    python benchmarks/demo_fingerprint.py --compare BEFORE.json FOLDER   # exit 1 and the differences if any
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

ROW_KEYS = ("number", "architecture", "fidelity", "state", "score", "val_loss", "val_accuracy", "costs", "error",
            "attempts", "violations")
CARD_KEYS = ("name", "classes", "input", "target", "cost_estimate", "host64_estimate", "flash_bytes",
             "float_test_accuracy", "int8_test_accuracy", "split", "preprocessing", "data", "training_recipe",
             "measured_arena_host64")
SEARCH_KEYS = ("strategy", "seed", "winner_trial", "winner_val_loss", "candidates", "trained", "infeasible", "failed",
               "interrupted")


def fingerprint(folder: Path) -> dict:
    """The deterministic part of a search folder."""
    with sqlite3.connect(f"file:{folder / 'journal.sqlite'}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        rows = [dict(row) for row in db.execute("SELECT * FROM trials ORDER BY number")]
    trials = [{key: (json.loads(row[key]) if isinstance(row[key], str) and key not in ("state", "error")
                     else row[key]) for key in ROW_KEYS} for row in rows]
    card = json.loads((folder / "card.json").read_text())
    figures = {key: card.get(key) for key in CARD_KEYS}
    figures["search"] = {key: card["search"].get(key) for key in SEARCH_KEYS}
    figures["final_training"] = {key: value for key, value in card["final_training"].items()
                                 if key not in ("seconds", "timings")}
    return {"trials": trials, "card": figures}


def current_layout(print_: dict) -> dict:
    """`print_` with every cost read as this version reads it (`Cost.from_dict`): a cost written before the C
    runtime's arena had a field of its own compares equal to the same cost written after."""
    from tinynas.cost.estimate import Cost

    def cost(data):
        return Cost.from_dict(data).to_dict() if isinstance(data, dict) and "peak_ram_bytes" in data else data

    card = {**print_["card"], **{key: cost(print_["card"].get(key)) for key in ("cost_estimate", "host64_estimate")}}
    return {"trials": [{**row, "costs": cost(row.get("costs"))} for row in print_["trials"]], "card": card}


def differences(before, after, where: str = "") -> list[str]:
    """Paths at which two fingerprints differ."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [line for key in sorted(set(before) | set(after))
                for line in differences(before.get(key), after.get(key), f"{where}.{key}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [line for i, (a, b) in enumerate(zip(before, after)) for line in differences(a, b, f"{where}[{i}]")]
    return [] if before == after else [f"{where}: {before!r} -> {after!r}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--compare", type=Path, help="a fingerprint JSON to compare the folder's with")
    args = parser.parse_args()
    current = fingerprint(args.folder)
    if args.compare is None:
        print(json.dumps(current, indent=1, sort_keys=True))
        return 0
    found = differences(current_layout(json.loads(args.compare.read_text())), current_layout(current))
    print(f"{len(current['trials'])} journal rows and {len(current['card'])} card sections compared: "
          + (f"{len(found)} differences" if found else "identical"))
    for line in found[:50]:
        print("  " + line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
