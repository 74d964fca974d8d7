"""Every built-in target's default winner on both emulated cores, checked by `tinynas hil` (issue 56).

    nice python benchmarks/hil.py [--budget 45s] [--windows 40] [--data cwru,isl] [--targets all]

For each data set (CWRU 0 hp, the method's BearingNAS10 files; ISL, the June sessions) and each built-in target, a
short search with tinynas's defaults (`fast`, `--runtime auto`, the `chip` accounting; 3 epochs per candidate:
this checks the chip, not accuracy), then the winner's test firmware built for QEMU's micro:bit (Cortex-M0, 16 KB
RAM, 256 KB flash: only where the model fits them) and MPS2-AN386 (Cortex-M4F), and its first test windows run there
through the test protocol, as `tinynas hil --qemu` does. Per winner and core: outputs identical to the host-built C
runtime, instructions per inference against the model's MACs, the painted stack against the cost model's, the model's
sections against its RAM and flash figures, and the build line. Writes results/hil.md and hil.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import serial

from tinynas.cost.targets import builtin_targets
from tinynas.data.spec import load_windows
from tinynas.hil.board import get_board
from tinynas.hil.build import build_firmware, write_firmware
from tinynas.hil.check import check_on_board, folder_test_windows
from tinynas.hil.protocol import HilLink
from tinynas.hil.qemu import emulated
from tinynas.progress import Progress
from tinynas.study import Study
from tinynas.trial import Fidelity
from tinynas.units import parse_duration

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = {"cwru": f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=FE&window=512&windows_per_file=200&resample=0",
        "isl": f"isl:{SHARED / 'isl'}"}
MICROBIT_RAM = 16 * 1024
MICROBIT_FLASH = 256 * 1024


def on_core(folder: Path, board_name: str, windows, labels, scratch: Path) -> dict:
    board = get_board(board_name)
    firmware = build_firmware(write_firmware(folder, board, scratch / board_name), board)
    with emulated(board, firmware.elf) as pty, serial.Serial(pty, board.baud, timeout=0.5) as port:
        report = check_on_board(folder, firmware.folder, board, HilLink(port, pty, timeout=120), windows, labels)
    assert firmware.model is not None and firmware.image is not None
    return {"board": board.name, "core": board.core, "checked": report.checked, "windows": report.windows,
            "identical_to_host": report.identical_to_host, "identical_to_tflm": report.identical_to_tflm,
            "instructions": report.median, "stack": report.stack_bytes, "stack_estimate": report.stack_estimate,
            "model_flash": firmware.model.flash, "model_ram": firmware.model.ram, "image_flash": firmware.image.flash,
            "image_ram": firmware.image.ram, "build_line": firmware.build_line, "compiler": firmware.compiler,
            "stopped": report.stopped}


def render(rows: list[dict], args: argparse.Namespace) -> str:
    """results/hil.md's text for `rows`."""
    lines = ["# The default winners on emulated chips, checked over the test protocol (issue 56)", "",
             f"Command: `python benchmarks/hil.py --budget {args.budget} --windows {args.windows}`. Per data set "
             f"and built-in target: a `fast` search with the defaults (3 epochs per candidate and 3 final: the chip "
             f"is checked, not accuracy), then the winner's test firmware (arm-none-eabi-gcc `-Os`, picolibc) on QEMU "
             f"with `-icount shift=0` (instructions, not cycles), its first {args.windows} test windows through the "
             f"UART. Data: CWRU 0 hp (`{DATA['cwru'].split('?')[1]}`), ISL (June sessions). Machine: "
             f"{os.cpu_count()} cores x86_64; shared with: {args.shared}.", "",
             "| data | target | winner | MACs | core | identical to host C | instructions / inference | "
             "instructions per MAC | stack measured / estimated | model RAM (.data+.bss) / arena est. | "
             "model flash / est. |", "|---|---|---|---:|---|---|---:|---:|---|---|---|"]
    for row in rows:
        for core in row["cores"]:
            e = row["estimate"]
            lines.append(f"| {row['data']} | {row['target']} | {row['winner']} | {row['macs']:,} | {core['core']} | "
                         f"{core['identical_to_host']} of {core['checked']} | {core['instructions']:,.0f} | "
                         f"{core['instructions'] / max(row['macs'], 1):.1f} | {core['stack']} / {e['stack']} B | "
                         f"{core['model_ram']:,} / {e['arena']:,} B | {core['model_flash']:,} / {e['flash']:,} B |")
        if not row["cores"]:
            lines.append(f"| {row['data']} | {row['target']} | {row['winner']} | {row['macs']:,} | (TFLite Micro: no "
                         f"C runtime to build) | | | | | | |")
    builds = sorted({(core["core"], core["compiler"], core["build_line"]) for row in rows for core in row["cores"]})
    lines += ["", "Builds:", ""] + [f"- {core}: {compiler}: `{line}`" for core, compiler, line in builds]
    runs = [(row, core) for row in rows for core in row["cores"]]
    if runs:
        def ratios(name: str) -> list[float]:
            return [core["instructions"] / max(row["macs"], 1) for row, core in runs if core["core"].startswith(name)]

        margins = [row["estimate"]["flash"] - core["model_flash"] for row, core in runs]
        identical = sum(core["identical_to_host"] == core["checked"] == core["windows"] for _, core in runs)
        stack_ok = sum(core["stack"] <= row["estimate"]["stack"] for row, core in runs)
        stack_max = max(core["stack"] for _, core in runs)
        arena_ok = sum(core["model_ram"] == row["estimate"]["arena"] for row, core in runs)
        m0, m4 = ratios("Cortex-M0"), ratios("Cortex-M4")
        lines += ["", f"{identical} of {len(runs)} winner-and-core runs gave the host-built C runtime's outputs on "
                  f"every window; the measured stack was within the estimate in {stack_ok} of {len(runs)} (largest "
                  f"{stack_max} B of {max(r['estimate']['stack'] for r in rows)} B); the model's .data + .bss was the "
                  f"estimated arena in {arena_ok} of {len(runs)}; its .text + .rodata was below the flash estimate by "
                  f"{min(margins)}-{max(margins)} B. Instructions per MAC: {min(m0):.1f}-{max(m0):.1f} on the "
                  f"Cortex-M0, {min(m4):.1f}-{max(m4):.1f} on the Cortex-M4F (QEMU instructions, not cycles)."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", default="45s", help="search budget per target")
    parser.add_argument("--windows", type=int, default=40, help="test windows run on each core")
    parser.add_argument("--data", default="cwru,isl")
    parser.add_argument("--targets", default="all", help="comma-separated built-in target keys, or all")
    parser.add_argument("--shared", default="nothing else ran", help="what shared the machine (for the results)")
    parser.add_argument("--render", type=Path, help="write hil.md again from this hil.json (no search, no QEMU)")
    args = parser.parse_args()
    if args.render is not None:
        stored = json.loads(args.render.read_text())
        for key, value in stored["args"].items():
            setattr(args, key, value)
        (RESULTS / "hil.md").write_text(render(stored["rows"], args))
        return 0
    targets = builtin_targets()
    keys = sorted(targets) if args.targets == "all" else args.targets.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.data.split(","):
            if not (SHARED / name).is_dir():
                print(f"skipping {name}: {SHARED / name} not there")
                continue
            windows = load_windows(DATA[name])
            for key in keys:
                started = time.monotonic()
                out = Path(scratch) / name / key
                result = Study(out, windows, targets[key], budget_seconds=parse_duration(args.budget),
                               strategy="fast", fidelity=Fidelity(3, 16, 3e-3), final_fidelity=Fidelity(3, 16, 3e-3),
                               data_spec=DATA[name], progress=Progress(interactive=False)).run()
                card, test = result.card, result.out_dir
                x, labels = folder_test_windows(test, card)
                x, labels = x[:args.windows], labels[:args.windows]
                cost = card.cost()
                fits = cost.peak_ram_bytes + 2048 < MICROBIT_RAM and cost.flash_bytes + 16_384 < MICROBIT_FLASH
                cores = (["microbit"] if fits else []) + ["mps2-an386"]
                row = {"data": name, "target": targets[key].name, "runtime": card.runtime,
                       "winner": result.winner.architecture.name(), "macs": cost.macs,
                       "estimate": {"ram": cost.peak_ram_bytes, "flash": cost.flash_bytes, "arena": cost.c_arena_bytes,
                                    "stack": cost.stack_bytes},
                       "cores": [on_core(test, core, x, labels, Path(scratch) / name / f"{key}-fw")
                                 for core in cores] if card.runtime == "c" else [],
                       "seconds": round(time.monotonic() - started)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hil.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1) + "\n")
    (RESULTS / "hil.md").write_text(render(rows, args))
    print(render(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
