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

from tinynas.cost.budget import BudgetError
from tinynas.cost.estimate import estimate
from tinynas.cost.targets import get_target
from tinynas.data.spec import load_windows
from tinynas.progress import Progress
from tinynas.study import Study
from tinynas.trial import Fidelity
from tinynas.units import kib, parse_duration

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
    # A reproduction of the method budgets as the method did: TFLite Micro, counted by its tool (issue 37).
    parser.add_argument("--runtime", default="tflm", help="auto, c or tflm (default tflm, the method's)")
    parser.add_argument("--accounting", default="method",
                        help="chip, arena or method (default method: the method's tool, 64-bit arena rounded up "
                             "to 512 B)")
    return parser.parse_args()


def ram_by_accounting(arch, target) -> dict:
    """The winner's RAM under every accounting (issue 37), and whether each fits the target's RAM and flash."""
    found = {}
    for key, runtime, accounting in (("method", "tflm", "method"), ("arena", "tflm", "arena"),
                                     ("tflm_chip", "tflm", "chip"), ("c_chip", "c", "chip")):
        cost = estimate(arch, runtime=runtime, accounting=accounting, core=target.core)
        found[key] = {"ram_bytes": cost.peak_ram_bytes, "flash_bytes": cost.flash_bytes, "fits": cost.fits(target)}
        if key == "tflm_chip":
            found["tflm_code_bytes"] = cost.code_bytes
    return found


def ram_cell(ram: dict) -> str:
    """'4,096 / 3,712 / 9,000 (no) / 1,900 B': RAM per accounting, with 'no' where the winner would not fit."""
    return " / ".join(f"{ram[key]['ram_bytes']:,}" + ("" if ram[key]["fits"] else " (no)")
                      for key in ("method", "arena", "tflm_chip", "c_chip")) + " B"


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
                               augment="none", kernels="3", runtime=args.runtime,
                               accounting=args.accounting).run()
            except BudgetError as exc:
                row.update(status="no architecture fits", note=str(exc))
                rows.append(row)
                continue
            card = result.card.to_dict()
            row.update(status="ok", winner=result.winner.architecture.name(),
                       filters=list(result.winner.architecture.filters),
                       int8_test_accuracy=card["int8_test_accuracy"], float_test_accuracy=card["float_test_accuracy"],
                       ram_estimate_bytes=card["cost_estimate"]["peak_ram_bytes"],
                       accounting=card["cost_estimate"].get("accounting"),
                       ram_by_accounting=ram_by_accounting(result.winner.architecture, target),
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
             f"{windows.classes} classes. Provenance: "
             f"{json.dumps({k: v for k, v in windows.provenance.items() if k != 'per_file'})}.",
             f"Split: {split.get('protocol', args.split)} ({split.get('train', '?')}/{split.get('val', '?')}/"
             f"{split.get('test', '?')} windows).",
             f"Search: strategy `{args.strategy}`, {args.epochs} epochs per candidate (Adam 1e-3, batch 16), budget "
             f"{args.budget} per target, {args.workers} workers, seed {args.seed}; winner retrained "
             f"{args.final_epochs} epochs at lr 0.01 (best-validation weights), converted to full int8 and scored "
             f"with LiteRT on the test split. Machine: {os.cpu_count()} cores x86_64 (not a Raspberry Pi).",
             "",
             f"Budget: runtime `{args.runtime}`, accounting `{args.accounting}` (what the search counted). RAM of each "
             "winner under every accounting: the method's tool (64-bit arena rounded up to 512 B), TFLite Micro's "
             "32-bit arena alone, TFLite Micro's whole footprint on the chip (arena + interpreter + stack, "
             "flash + its code), tinynas's C runtime (arena + input/output + stack).",
             "",
             "| target (RAM / flash) | winner | int8 test acc | float test acc "
             "| RAM: method / 32-bit arena / TFLM on chip / C runtime | arena 64-bit est. / measured "
             "| flash .tflite (+ TFLM code) | MACs | search s | candidates (trained / infeasible / failed) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        budget = f"{r['target']} ({kib(r['target_ram_bytes'])} / {kib(r['target_flash_bytes'])})"
        if r["status"] != "ok":
            lines.append(f"| {budget} | {r['status']} | | | | | | | | {r['note']} |")
            continue
        lines.append(
            f"| {budget} | {r['winner']} {r['filters']} | **{r['int8_test_accuracy']:.3f}** "
            f"| {r['float_test_accuracy']:.3f} "
            f"| {ram_cell(r['ram_by_accounting'])} | {r['arena_host64_estimate']:,} / "
            f"{r['arena_host64_measured'] or '-'} B "
            f"| {r['flash_bytes']:,} B (+ {r['ram_by_accounting']['tflm_code_bytes']:,}) | {r['macs']:,} "
            f"| {r['search_seconds']:.0f} "
            f"| {r['candidates']} ({r['trained']} / {r['infeasible']} / {r['failed']}) |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps({"command": command, "args": vars(args), "rows": rows},
                                                     indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
