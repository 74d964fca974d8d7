"""Does every built-in target's default winner fit its chip, whole? (issue 37)

    nice python benchmarks/default_winners.py [--budget 60s] [--targets all]

For each built-in target, a short search with tinynas's defaults (`--runtime auto`, the `chip` accounting,
the `fast` strategy, the device service's default, which trains the largest networks that fit, so winners
sit at the budget's edge) on built-in synthetic bearing vibration; then the winner's generated C
(`model_compiled.c`) is cross-compiled for a Cortex-M0 (QEMU micro:bit) or, when it needs more RAM than that
board has, a Cortex-M4F (QEMU MPS2-AN386), and run on a few windows. What the chip must hold, measured: the
model's code and tables (.text + .rodata + .data of its object file) as flash; its arena (.bss), the caller's
input and output buffers and the peak stack of `tinynas_infer` as RAM. Both must be within the target's
budget, and the estimate the search used must not be below them. Writes results/default-winners.md/.json.

Short searches (3 epochs per candidate): this checks the budget, not accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devtools/: not installed, beside tinynas

import numpy as np

from tinynas.cost.targets import builtin_targets
from tinynas.data.spec import load_windows
from tinynas.progress import Progress
from tinynas.study import Study
from tinynas.trial import Fidelity
from tinynas.units import kib, parse_duration

RESULTS = Path(__file__).parent / "results"
DATA = "synthetic:vibration?windows_per_class=40&windows_per_recording=4&seed=3"
MICROBIT_RAM = 16 * 1024


def measure(folder: Path, windows: np.ndarray, ram_estimate: int, work: Path) -> dict:
    """Cross-compile and run the winner's C runtime; its flash and RAM as the chip holds them."""
    from devtools import emulate
    from tinynas.deploy.litert import Int8Model
    from tinynas.deploy.modeldir import ModelDir

    model = ModelDir.open(folder)
    board = "microbit" if ram_estimate + 2048 < MICROBIT_RAM else "mps2-an386"
    int8 = Int8Model((folder / "model.tflite").read_bytes())
    quantized = int8.quantize(model.preprocessing.apply(windows)).reshape(len(windows), -1)
    run = emulate.run_on_qemu(folder / "model_compiled.c", folder / "model_compiled.h", quantized, board, work,
                              timeout=600)
    arch = model.architecture
    io = arch.input_length * arch.input_channels + arch.classes
    return {"board": board, "core": emulate.BOARDS[board].core, "flash_bytes": run.model.flash,
            "arena_bytes": run.model.ram, "io_bytes": io, "stack_bytes": run.stack_peak,
            "ram_bytes": run.model.ram + io + run.stack_peak}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", default="60s", help="search budget per target")
    parser.add_argument("--targets", default="all", help="comma-separated built-in target keys, or all")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--strategy", default="fast")
    args = parser.parse_args()
    from devtools import emulate

    if emulate.missing_tools():
        print(f"missing {', '.join(emulate.missing_tools())}: apt-get install gcc-arm-none-eabi "
              f"picolibc-arm-none-eabi qemu-system-arm")
        return 0
    targets = builtin_targets()
    keys = sorted(targets) if args.targets == "all" else args.targets.split(",")
    windows = load_windows(DATA)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for key in keys:
            target = targets[key]
            started = time.monotonic()
            result = Study(Path(scratch) / key, windows, target, budget_seconds=parse_duration(args.budget),
                           strategy=args.strategy,
                           fidelity=Fidelity(3, 16, 3e-3), final_fidelity=Fidelity(3, 16, 3e-3),
                           workers=args.workers, data_spec=DATA, progress=Progress(interactive=False)).run()
            card = result.card
            cost = card.cost_estimate
            work = Path(scratch) / f"{key}-qemu"
            work.mkdir()
            measured = measure(result.out_dir, windows.x[:8], cost["peak_ram_bytes"], work)
            fits = measured["ram_bytes"] <= target.ram_bytes and measured["flash_bytes"] <= target.flash_bytes
            covered = (measured["ram_bytes"] <= cost["peak_ram_bytes"]
                       and measured["flash_bytes"] <= cost["flash_bytes"])
            rows.append({"target": target.name, "core": target.core, "ram_budget": target.ram_bytes,
                         "flash_budget": target.flash_bytes, "runtime": card.runtime,
                         "reason": (card.runtime_choice or {}).get("reason"), "accounting": card.accounting,
                         "winner": result.winner.architecture.name(),
                         "estimate_ram": cost["peak_ram_bytes"], "estimate_flash": cost["flash_bytes"],
                         "measured": measured, "fits": fits, "estimate_covers_measured": covered,
                         "seconds": round(time.monotonic() - started)})
            print(json.dumps(rows[-1]), flush=True)
    lines = ["# Every built-in target's default winner on its chip (issue 37)", "",
             f"Command: `python benchmarks/default_winners.py --budget {args.budget} --strategy {args.strategy}`",
             f"Data `{DATA}`: {len(windows)} windows of {windows.window_length}x{windows.channels}, "
             f"{windows.classes} classes. Defaults: `--runtime auto`, accounting `chip`, strategy `{args.strategy}`, "
             f"3 epochs per candidate and 3 final (this checks the budget, not accuracy), "
             f"budget {args.budget} per target, "
             f"{args.workers} workers. Measured: the winner's `model_compiled.c` built by arm-none-eabi-gcc 12.2 "
             f"`-Os` and run on QEMU (8 windows): flash = its object's .text + .rodata + .data, RAM = its .bss "
             f"(the arena) + the caller's input and output buffers + the peak stack of `tinynas_infer`. Machine: "
             f"{os.cpu_count()} cores x86_64.", "",
             "| target (core) | RAM / flash budget | runtime (auto) | winner | RAM estimated / measured (board) | "
             "flash estimated / measured | fits the chip | estimate covers measured |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r["measured"]
        lines.append(f"| {r['target']} ({r['core']}) | {kib(r['ram_budget'])} / {kib(r['flash_budget'])} "
                     f"| {r['runtime']} | {r['winner']} | {r['estimate_ram']:,} / {m['ram_bytes']:,} B "
                     f"({m['core']}) | {r['estimate_flash']:,} / {m['flash_bytes']:,} B "
                     f"| {'yes' if r['fits'] else '**no**'} | {'yes' if r['estimate_covers_measured'] else '**no**'} |")
    fit = sum(r["fits"] for r in rows)
    lines += ["", f"{fit} of {len(rows)} default winners fit their chip by the whole-footprint rule, measured.",
              "Cores that are neither Armv6-M nor Armv7E-M (ESP32-S3's Xtensa LX7, the LSM6DSO16IS's ISPU) were "
              "measured on the Arm board named: their own compilers' code size is not measured here."]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "default-winners.json").write_text(json.dumps({"data": DATA, "args": vars(args), "rows": rows},
                                                             indent=2) + "\n")
    (RESULTS / "default-winners.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
