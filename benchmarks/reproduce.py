"""Shared runner of the benchmark reproductions: one search per target, one results table.

Used by reproduce_cwru.py and reproduce_isl.py; each writes benchmarks/results/<name>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

from tinynas.cost.estimate import BudgetError
from tinynas.data.spec import load_windows
from tinynas.progress import Progress
from tinynas.study import Study, parse_duration
from tinynas.cost.targets import get_target, kib
from tinynas.trial import Fidelity

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def arguments(description: str, default_data: str, targets: tuple[str, ...]) -> argparse.Namespace:
    """Command-line options common to both reproductions."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", default=default_data, help="data spec (default: the copy in ../shared/data)")
    parser.add_argument("--targets", default=",".join(targets))
    parser.add_argument("--split", default="paper")
    parser.add_argument("--strategy", default="paper")
    parser.add_argument("--budget", default="8m", help="search budget per target")
    parser.add_argument("--epochs", type=int, default=15, help="epochs per candidate (the method: 100)")
    parser.add_argument("--final-epochs", type=int, default=60, help="final training epochs (the method: 100)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="keep each study's folder here (default: a temporary folder)")
    return parser.parse_args()


def run(name: str, title: str, args: argparse.Namespace) -> int:
    """Search every target, write the table, print it (results/<name>.md, or <name>-<split>.md off-protocol)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    source, _, rest = args.data.partition(":")
    path = rest.partition("?")[0]
    if source in ("isl", "cwru") and not Path(path).exists():
        print(f"{path} does not exist: nothing to reproduce (put the data set there or pass --data)")
        return 0
    windows = load_windows(args.data)
    command = "python " + " ".join(shlex.quote(a) for a in [f"benchmarks/reproduce_{name}.py", *sys.argv[1:]])
    script = name
    if args.split != "paper":
        name = f"{name}-{args.split}"
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(args.out) if args.out else Path(scratch)
        for target_name in args.targets.split(","):
            target = get_target(target_name)
            started = time.monotonic()
            row = {"target": target.name, "target_ram_bytes": target.ram_bytes,
                   "target_flash_bytes": target.flash_bytes}
            try:
                result = Study(base / target_name, windows, target, strategy=args.strategy,
                               budget_seconds=parse_duration(args.budget), seed=args.seed,
                               fidelity=Fidelity(args.epochs, 16, 1e-3),
                               final_fidelity=Fidelity(args.final_epochs, 16, 0.01), workers=args.workers,
                               data_spec=args.data, split=args.split, progress=Progress(interactive=False),
                               augment="none", kernels="3").run()
            except BudgetError as exc:
                row.update(status="no architecture fits", note=str(exc))
                rows.append(row)
                continue
            card = result.card.to_dict()
            row.update(status="ok", winner=result.winner.architecture.name(),
                       filters=list(result.winner.architecture.filters),
                       int8_test_accuracy=card["int8_test_accuracy"], float_test_accuracy=card["float_test_accuracy"],
                       ram_estimate_bytes=card["cost_estimate"]["peak_ram_bytes"],
                       arena_host64_estimate=card["host64_estimate"]["arena_bytes"],
                       arena_host64_measured=card.get("measured_arena_host64", {}).get("arena_bytes"),
                       flash_bytes=card["flash_bytes"], macs=card["cost_estimate"]["macs"],
                       search_seconds=card["search"]["seconds"], candidates=card["search"]["candidates"],
                       trained=card["search"]["trained"], infeasible=card["search"]["infeasible"],
                       failed=card["search"]["failed"], total_seconds=round(time.monotonic() - started),
                       split=card["split"])
            rows.append(row)
    split = next((r["split"] for r in rows if "split" in r), {})
    lines = [f"# {title}" + (f" ({args.split} split)" if name != script else ""), "",
             f"Command: `{command}`",
             f"Data: `{args.data}`: {len(windows)} windows of {windows.window_length}x{windows.channels}, "
             f"{windows.classes} classes. Provenance: {json.dumps({k: v for k, v in windows.provenance.items() if k != 'per_file'})}.",
             f"Split: {split.get('protocol', args.split)} ({split.get('train', '?')}/{split.get('val', '?')}/"
             f"{split.get('test', '?')} windows).",
             f"Search: strategy `{args.strategy}`, {args.epochs} epochs per candidate (Adam 1e-3, batch 16), budget "
             f"{args.budget} per target, {args.workers} workers, seed {args.seed}; winner retrained {args.final_epochs} "
             f"epochs at lr 0.01 (best-validation weights), converted to full int8 and scored with LiteRT on the "
             f"test split. Machine: {os.cpu_count()} cores x86_64 (not a Raspberry Pi).",
             "",
             "| target (RAM / flash) | winner | int8 test acc | float test acc | RAM est. 32-bit | arena 64-bit est. / measured | flash | MACs | search s | candidates (trained / infeasible / failed) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        budget = f"{r['target']} ({kib(r['target_ram_bytes'])} / {kib(r['target_flash_bytes'])})"
        if r["status"] != "ok":
            lines.append(f"| {budget} | {r['status']} | | | | | | | | {r['note']} |")
            continue
        lines.append(
            f"| {budget} | {r['winner']} {r['filters']} | **{r['int8_test_accuracy']:.3f}** | {r['float_test_accuracy']:.3f} "
            f"| {r['ram_estimate_bytes']:,} B | {r['arena_host64_estimate']:,} / {r['arena_host64_measured'] or '-'} B "
            f"| {r['flash_bytes']:,} B | {r['macs']:,} | {r['search_seconds']:.0f} "
            f"| {r['candidates']} ({r['trained']} / {r['infeasible']} / {r['failed']}) |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps({"command": command, "args": vars(args), "rows": rows},
                                                     indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
