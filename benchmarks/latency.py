"""Time per inference: the time model fitted to the emulated cores, and the generated kernels' speed (issue 66).

    nice python benchmarks/latency.py fit [--fit 120] [--check 40] [--seed 1]     -> results/latency-fit.md
    nice python benchmarks/latency.py kernels --before-tree TREE                   -> results/latency-kernels.md
    nice python benchmarks/latency.py winners [--seeds 0,1,2] [--resume]           -> results/latency.md

`fit`: random architectures (`devtools.integer_models`: five input shapes, k 1-32, 0-7 cells, kernels 1-9, 2-26
classes, whatever the micro:bit holds), each model's generated C run on QEMU's micro:bit (Cortex-M0) and MPS2-AN386
(Cortex-M4F) with `-icount` (instructions); outputs checked against the host build. The time model's coefficients
(`tinynas.cost.latency.COEFFICIENTS`) are fitted by non-negative least squares on the first set and checked on a
second set drawn with another seed: the error of every architecture, worst and median, per core. It prints the
coefficients to paste into the module.

`winners`: every built-in target's winner on CWRU and ISL, 3 seeds, with and without the service's hop as a time
budget: accuracy, MACs, instructions estimated and counted on both cores, ms at the clock, share of the hop, uJ.

`kernels`: the same architectures (the default winners' shapes) under the generated C of another revision (a git
worktree made for the run) and of this checkout: instructions per inference and per MAC, per layer kind, on both
cores, every window's outputs compared with the host build.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devtools.integer_models import BOARDS, count_on_cores, random_time_architectures  # noqa: E402
from tinynas.cost.estimate import macs  # noqa: E402
from tinynas.cost.latency import COEFFICIENTS, FEATURES, c_features  # noqa: E402
from tinynas.space import Architecture  # noqa: E402

RESULTS = Path(__file__).parent / "results"
KERNELS = {"microbit": "v6m", "mps2-an386": "dsp"}


def measure(archs, seed_base: int, scratch: Path, label: str) -> list[dict]:
    rows = []
    started = time.monotonic()
    for index, arch in enumerate(archs):
        counted = count_on_cores(arch, seed_base + index, scratch / f"{label}{index}")
        for one in counted:
            rows.append({"arch": arch.to_dict(), "name": arch.name(),
                         "shape": f"{arch.input_length}x{arch.input_channels}", "macs": macs(arch),
                         "board": one.board, "instructions": one.instructions, "identical": one.identical,
                         "stack": one.stack_bytes})
        if (index + 1) % 10 == 0:
            print(f"  {label}: {index + 1}/{len(archs)} measured ({time.monotonic() - started:.0f} s)", flush=True)
    return rows


def fit(rows: list[dict]) -> dict[str, dict[str, float]]:
    from scipy.optimize import nnls

    from tinynas.space import Architecture

    found = {}
    for board, kernels in KERNELS.items():
        mine = [row for row in rows if row["board"] == board]
        features = np.array([[c_features(Architecture.from_dict(row["arch"]), kernels)[name] for name in FEATURES]
                             for row in mine])
        counts = np.array([row["instructions"] for row in mine])
        # Relative error matters (a small model's 10 % is as wrong as a big one's): weight rows by 1 / count.
        weights = 1.0 / counts
        solution, _ = nnls(features * weights[:, None], counts * weights)
        found[kernels] = {name: round(float(value), 3) for name, value in zip(FEATURES, solution)}
    return found


def errors(rows: list[dict], coefficients: dict[str, dict[str, float]]) -> list[dict]:
    from tinynas.space import Architecture

    out = []
    for row in rows:
        kernels = KERNELS[row["board"]]
        features = c_features(Architecture.from_dict(row["arch"]), kernels)
        estimate = sum(coefficients[kernels][name] * count for name, count in features.items())
        out.append({**row, "estimate": estimate, "error": estimate / row["instructions"] - 1})
    return out


def render_fit(args, train: list[dict], check: list[dict], coefficients, seconds: float) -> str:
    lines = ["# The time model against the emulated cores (issue 66)", "",
             f"Command: `python benchmarks/latency.py fit --fit {args.fit} --check {args.check} --seed {args.seed}` "
             f"({seconds:.0f} s). Random architectures from `devtools.integer_models.random_time_architectures` "
             "(input shapes 400x8, 512x1, 128x3, 250x6, 75x2; k 1-32, 0-7 cells, kernel 1-9, 2-26 classes; "
             "what the micro:bit's 16 KiB RAM and 200 KiB of flash hold), random int8 weights and requantization "
             "(`random_integer_model`), the generated C built with arm-none-eabi-gcc 12.2 `-Os` and run on QEMU 7.2 "
             "(`-icount shift=0`: instructions, not cycles), 2 random windows each. Fitted (non-negative least "
             f"squares, relative) on {args.fit} architectures (seed {args.seed}), checked on {args.check} others "
             f"(seed {args.seed + 1000}). Machine: 2 cores x86_64, {args.shared}.", "",
             "| core | set | architectures | outputs identical to the host build | median abs. error | worst error | "
             "within 15 % | within 5 % |", "|---|---|---:|---|---:|---:|---:|---:|"]
    for board in BOARDS:
        for label, rows in (("fit", train), ("check", check)):
            mine = [row for row in rows if row["board"] == board]
            errs = [abs(row["error"]) for row in mine]
            identical = sum(row["identical"] for row in mine)
            lines.append(f"| {board} ({'Cortex-M0' if board == 'microbit' else 'Cortex-M4F'}) | {label} | "
                         f"{len(mine)} | {identical} of {len(mine)} | {100 * statistics.median(errs):.1f} % | "
                         f"{100 * max(errs):.1f} % | {sum(e <= 0.15 for e in errs)} of {len(errs)} | "
                         f"{sum(e <= 0.05 for e in errs)} of {len(errs)} |")
    stacks = [row["stack"] for row in train + check]
    lines += ["", f"Peak stack of the inference, painted and read back: {min(stacks)}-{max(stacks)} B over every run "
              "(the cost model's `STACK_BYTES` is set above it).", "",
              "Coefficients (instructions per unit of each feature of `tinynas.cost.latency.FEATURES`):", "",
              "| feature | Cortex-M0 (v6m kernels) | Cortex-M4F (DSP kernels) |", "|---|---:|---:|"]
    for name in FEATURES:
        lines.append(f"| {name} | {coefficients['v6m'][name]:.3f} | {coefficients['dsp'][name]:.3f} |")
    worst = sorted(check, key=lambda row: -abs(row["error"]))[:6]
    lines += ["", "Worst of the check set:", "",
              "| core | architecture | input | MACs | measured | estimated | error |",
              "|---|---|---|---:|---:|---:|---:|"]
    for row in worst:
        lines.append(f"| {row['board']} | {row['name']} | {row['shape']} | {row['macs']:,} | "
                     f"{row['instructions']:,.0f} | {row['estimate']:,.0f} | {100 * row['error']:+.1f} % |")
    return "\n".join(lines) + "\n"


def cmd_fit(args) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tinynas-latency-") as scratch:
        train = measure(random_time_architectures(args.fit, args.seed), 0, Path(scratch), "fit")
        check = measure(random_time_architectures(args.check, args.seed + 1000), 10_000, Path(scratch), "check")
    coefficients = fit(train)
    train, check = errors(train, coefficients), errors(check, coefficients)
    text = render_fit(args, train, check, coefficients, time.monotonic() - started)
    (RESULTS / "latency-fit.md").write_text(text)
    (RESULTS / "latency-fit.json").write_text(json.dumps({"coefficients": coefficients, "fit": train,
                                                          "check": check}, indent=1))
    print(text)
    print("COEFFICIENTS =", json.dumps(coefficients, indent=1))
    unchanged = {family: {name: value for name, value in table.items() if value}
                 for family, table in coefficients.items()} == COEFFICIENTS
    print("the module's coefficients are these" if unchanged else "paste these into tinynas/cost/latency.py")
    return 0


# The default winners of every built-in target (results/hil.md, before this issue): the shapes the product serves.
WINNERS = [("isl", Architecture(400, 8, 26, k, c)) for k, c in ((17, 3), (13, 5), (16, 6), (12, 4), (20, 5),
                                                                 (26, 4), (10, 5), (2, 7), (54, 2))] + \
          [("cwru", Architecture(512, 1, 10, k, c, kernel_size=9)) for k, c in ((16, 5), (4, 6), (5, 7), (10, 4),
                                                                                (14, 3), (10, 6), (9, 3))]
KINDS = ("stem conv + pool", "cell conv + pool", "last conv into MEAN", "MEAN + dense head")


def _layer_macs(arch: Architecture) -> dict[str, int]:
    found = dict.fromkeys(KINDS, 0)
    cin = arch.input_channels
    for index, (cout, rows) in enumerate(zip(arch.filters, arch.lengths)):
        kind = KINDS[2] if index == arch.c else KINDS[0] if index == 0 else KINDS[1]
        found[kind] += cin * arch.kernel_size * rows * cout
        cin = cout
    found[KINDS[3]] += cin * arch.classes
    return found


HEAD_CALLS = {"requantize", "high_mul", "divide_by_pot", "__aeabi_lmul", "__muldi3"}
"""What tinynas_infer calls itself for the MEAN and the dense head (the requantization), before or after this
issue's kernels; the last conv's calls are its kernels (conv_at, conv_sums, emit_sum, dot, memset)."""


def stage_profile(elf: Path, board: str, workdir: Path) -> dict[str, int]:
    """Instructions of one inference per layer kind. Every executed block is attributed: a call tinynas_infer makes
    to conv_pool is a pooled stage (the first the stem, the others cells); anything else it runs (the last conv,
    which gcc inlines into it, calling its kernels directly) is the last conv into MEAN, up to its last call; its
    own instructions after that are the MEAN and the dense head. QEMU logs every translated block's instructions
    once (`in_asm`) and every execution of a block (`exec,nochain`); a block never spans a call."""
    import re
    import subprocess

    from devtools.emulate import qemu_command

    ranges = {}
    for line in subprocess.run(["arm-none-eabi-nm", "-n", "-S", str(elf)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in "tTwW":
            ranges[fields[3]] = (int(fields[0], 16), int(fields[0], 16) + int(fields[1], 16))
    infer, main, pool = ranges["tinynas_infer"], ranges["main"], ranges.get("conv_pool", (0, 0))
    log = workdir / "exec.log"
    command = qemu_command(board, elf)
    at = command.index("-icount")
    command[at:at + 2] = ["-d", "in_asm,exec,nochain", "-D", str(log)]
    subprocess.run(command, cwd=workdir, capture_output=True, timeout=1200, check=True)
    executed = re.compile(r"^Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/")
    instruction = re.compile(r"^0x([0-9a-f]+):")
    sizes: dict[int, int] = {}
    block, count = None, 0
    kinds = dict.fromkeys(KINDS, 0)
    pooled, own, inside, callee, current = 0, 0, False, None, KINDS[2]
    with log.open() as trace:
        for line in trace:
            found = instruction.match(line)
            if found:  # a block being translated: its instructions, one line each
                if block is None:
                    block, count = int(found.group(1), 16), 0
                count += 1
                continue
            if block is not None:
                sizes[block], block = count, None
            found = executed.match(line)
            if found is None:
                continue
            pc = int(found.group(1), 16)
            size = sizes.get(pc, 0)
            if infer[0] <= pc < infer[1]:
                inside, callee = True, None
                own += size
            elif inside and main[0] <= pc < main[1]:
                break  # back in the harness: one window, one inference
            elif inside:
                if callee is None:  # a call from tinynas_infer: which layer it belongs to, by the function called
                    name = next((n for n, (low, high) in ranges.items() if low <= pc < high), "")
                    callee = ("pool" if pool[0] <= pc < pool[1] else "head" if name in HEAD_CALLS else "last")
                    kind = {"pool": KINDS[0] if pooled == 0 else KINDS[1], "last": KINDS[2], "head": KINDS[3]}[callee]
                    pooled += callee == "pool"
                    kinds[kind] += own  # infer's own instructions before the call set it up
                    own, current = 0, kind
                kinds[current] += size
    kinds[KINDS[3]] += own
    log.unlink()
    return kinds


def cmd_kernels(args) -> int:
    import pickle
    import subprocess

    from devtools.emulate import build_image
    from devtools.integer_models import random_integer_model
    from tinynas.deploy.c_codegen import generate_c

    before = Path(args.before_tree)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tinynas-kernels-") as scratch:
        for index, (data, arch) in enumerate(WINNERS):
            if macs(arch) > args.max_macs:
                continue
            model = random_integer_model(arch, index)
            folder = Path(scratch) / str(index)
            folder.mkdir()
            (folder / "model.pkl").write_bytes(pickle.dumps(model))
            sources = {"after": generate_c(model)}
            script = ("import pickle, sys, json; from tinynas.deploy.c_codegen import generate_c; "
                      "m = pickle.load(open(sys.argv[1], 'rb')); print(json.dumps(generate_c(m)))")
            generated = subprocess.run([sys.executable, "-c", script, str(folder / "model.pkl")], capture_output=True,
                                       text=True, check=True, env={**os.environ, "PYTHONPATH": str(before)}, cwd=before)
            sources["before"] = tuple(json.loads(generated.stdout))
            size = (1, arch.input_length * arch.input_channels)
            windows = np.random.default_rng(index).integers(-128, 128, size=size, dtype=np.int8)
            for version, (source, header) in sources.items():
                work = folder / version
                work.mkdir()
                (work / "model_compiled.c").write_text(source)
                (work / "model_compiled.h").write_text(header)
                for board in BOARDS:
                    elf, _, _ = build_image(work / "model_compiled.c", work / "model_compiled.h", board, work / board)
                    windows.tofile(work / board / "windows.bin")
                    kinds = stage_profile(elf.resolve(), board, work / board)
                    rows.append({"data": data, "name": arch.name(), "version": version, "board": board,
                                 "instructions": kinds, "macs": _layer_macs(arch), "total": sum(kinds.values())})
            print(f"  {index + 1}/{len(WINNERS)} {arch.name()}", flush=True)
    text = render_kernels(args, rows)
    (RESULTS / "latency-kernels.md").write_text(text)
    (RESULTS / "latency-kernels.json").write_text(json.dumps(rows, indent=1))
    print(text)
    return 0


def render_kernels(args, rows: list[dict]) -> str:
    lines = ["# The generated kernels before and after (issue 66)", "",
             f"Command: `python benchmarks/latency.py kernels --before-tree TREE` (TREE: a worktree at {args.label}). "
             "The default winners of every built-in target (results/hil.md: 9 ISL 400x8 and 7 CWRU 512x1 kernel-9 "
             f"architectures; those above {args.max_macs:,} MACs left out), random int8 weights and requantization "
             "(`devtools.integer_models`), the same model "
             "generated by both revisions, built with arm-none-eabi-gcc 12.2 -Os and run for one window on QEMU 7.2 "
             "with every executed block traced and attributed to a layer kind: a call of `tinynas_infer` to "
             "`conv_pool` is a pooled stage (the first the stem); what it runs otherwise up to its last call is "
             "the last conv (inlined into it by gcc); its own code after that the MEAN and the dense head. "
             "Instructions, not cycles. Machine: 2 cores x86_64.", "",
             "| core | layer kind | MACs | instructions before | after | per MAC before | after | speed-up |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for board in BOARDS:
        for kind in KINDS:
            macs_total = sum(row["macs"][kind] for row in rows if row["board"] == board and row["version"] == "after")
            counts = {version: sum(row["instructions"][kind] for row in rows
                                   if row["board"] == board and row["version"] == version)
                      for version in ("before", "after")}
            lines.append(f"| {board} | {kind} | {macs_total:,} | {counts['before']:,} | {counts['after']:,} | "
                         f"{counts['before'] / max(macs_total, 1):.2f} | {counts['after'] / max(macs_total, 1):.2f} | "
                         f"{counts['before'] / max(counts['after'], 1):.2f}x |")
    lines += ["", "Per architecture (whole inference, instructions per MAC):", "",
              "| data | architecture | MACs | M0 before | M0 after | M4F before | M4F after |",
              "|---|---|---:|---:|---:|---:|---:|"]
    names = list(dict.fromkeys((row["data"], row["name"]) for row in rows))
    for data, name in names:
        mine = {(row["version"], row["board"]): row for row in rows if row["name"] == name and row["data"] == data}
        total = sum(mine["after", "microbit"]["macs"].values())
        cells = [f"{mine[v, b]['total'] / total:.2f}" for b in BOARDS for v in ("before", "after")]
        lines.append(f"| {data} | {name} | {total:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = {"cwru": f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=FE&window=512&windows_per_file=200&resample=0",
        "isl": f"isl:{SHARED / 'isl'}"}
HOP_SECONDS = 0.25
"""The service's hop: the time budget every `with` search keeps."""


def _measured(folder: Path, arch: Architecture, scratch: Path) -> dict[str, float]:
    """QEMU's instructions per inference of a model folder's generated C on both cores (random windows)."""
    from devtools.emulate import run_on_qemu
    from tinynas.cost.c_runtime import estimate_c

    windows = np.random.default_rng(0).integers(-128, 128, size=(2, arch.input_length * arch.input_channels),
                                                dtype=np.int8)
    found = {}
    for board in BOARDS:
        cost = estimate_c(arch)
        if board == "microbit" and (cost.ram_bytes > 14 << 10 or cost.flash_bytes > 240 << 10):  # its 16K / 256K
            continue
        run = run_on_qemu(folder / "model_compiled.c", folder / "model_compiled.h", windows, board,
                          scratch / board, timeout=1200)
        found[board] = run.instructions_mean
    return found


def cmd_winners(args) -> int:
    """Every built-in target's default winner with and without the service's hop as a time budget."""
    from tinynas.cost.budget import Budget
    from tinynas.cost.latency import c_instructions
    from tinynas.cost.targets import builtin_targets
    from tinynas.data.spec import load_windows
    from tinynas.study.settings import StudyError

    targets = builtin_targets()
    keys = sorted(targets) if args.targets == "all" else args.targets.split(",")
    out_path = RESULTS / "latency.jsonl"
    rows_by: dict[tuple, dict] = {}
    if (args.resume or args.render) and out_path.exists():
        for line in out_path.read_text().splitlines():
            row = json.loads(line)
            rows_by[(row["data"], row["target_key"], row["seed"], row["latency_seconds"])] = row
    elif out_path.exists():
        out_path.unlink()
    if args.render:  # the rows as they stand (a run stopped between rows), nothing searched
        (RESULTS / "latency.md").write_text(render_winners(args, list(rows_by.values())))
        return 0
    done = set(rows_by)
    work = Path(args.work)
    names = [n for n in args.data.split(",") if (SHARED / n).is_dir() or print(f"skipping {n}: not there")]
    loaded = {name: load_windows(DATA[name]) for name in names}
    # Seeds outermost: a stopped run has every target at the first seeds rather than all seeds of a few targets.
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name, windows in loaded.items():
            for key in keys:
                target = targets[key]
                for latency in (None, HOP_SECONDS):
                    if (name, key, seed, latency) in done:
                        continue
                    started = time.monotonic()
                    budget = Budget.resolve(target, "auto", latency_seconds=latency)
                    free = work / name / key / f"seed{seed}-free"
                    if latency is not None and _all_keep(free, budget):
                        # Every candidate the free search trained keeps the hop: the hop search draws the same
                        # candidates (a draw refused here was refused there), so it is not run twice.
                        row = dict(rows_by[(name, key, seed, None)], latency_seconds=latency, same_as_free=True,
                                   wall_seconds=0)
                        _append(out_path, row)
                        continue
                    folder = work / name / key / f"seed{seed}-{'hop' if latency else 'free'}"
                    try:
                        card, trials = _search(args, folder, windows, target, seed, latency, DATA[name])
                    except StudyError as error:  # a target nothing fits is a row that says so, not a stop
                        row = {"data": name, "target_key": key, "target": target.name, "core": target.core,
                               "seed": seed, "latency_seconds": latency, "winner": None, "why": str(error),
                               "wall_seconds": round(time.monotonic() - started)}
                        rows_by[(name, key, seed, latency)] = row
                        _append(out_path, row)
                        continue
                    arch = Architecture.from_dict(card.architecture)
                    chip = card.on_chip(HOP_SECONDS)
                    held = card.held_out()
                    refused = sum(1 for t in trials if any(v.startswith("time ") for v in t.violations))
                    row = {"data": name, "target_key": key, "target": target.name, "core": target.core,
                           "seed": seed, "latency_seconds": latency, "winner": arch.name(), "macs": card.cost().macs,
                           "hits": held.hits if held else None, "windows": held.windows if held else None,
                           "interval": list(held.interval) if held else None, "split": card.split["protocol"],
                           "estimated": {board: c_instructions(arch, KERNELS[board]) for board in BOARDS},
                           "measured": _measured(folder, arch, work / "qemu" / f"{name}-{key}-{seed}-{latency}"),
                           "seconds_at_clock": chip.seconds if chip else None,
                           "share_of_hop": chip.share_of_hop if chip else None,
                           "energy_uj": chip.energy_uj if chip else None,
                           "keeps_hop": None if budget.seconds(card.cost()) is None else
                           budget.seconds(card.cost()) <= HOP_SECONDS,
                           "refused_for_time": refused, "candidates": len(trials), "same_as_free": False,
                           "wall_seconds": round(time.monotonic() - started)}
                    rows_by[(name, key, seed, latency)] = row
                    _append(out_path, row)
    rows = [json.loads(line) for line in out_path.read_text().splitlines()]
    text = render_winners(args, rows)
    (RESULTS / "latency.md").write_text(text)
    print(text)
    return 0



def _search(args, folder: Path, windows, target, seed: int, latency, spec):
    """One winner search (read back when it finished before a stop): its card and trials."""
    from tinynas.card import read_card
    from tinynas.progress import Progress
    from tinynas.study import Study
    from tinynas.study.journal import peek
    from tinynas.trial import Fidelity

    if (folder / "card.json").exists():
        return read_card(folder), peek(folder / "journal.sqlite")[0]
    result = Study(folder, windows, target, strategy="fast", seed=seed, budget_seconds=parse_budget(args.budget),
                   fidelity=Fidelity(args.epochs, 32, 3e-3),
                   final_fidelity=Fidelity(args.final_epochs, 32, 3e-3, schedule="cosine"),
                   workers=args.workers, latency_seconds=latency, data_spec=spec,
                   progress=Progress(interactive=False), resume=(folder / "journal.sqlite").exists()).run()
    return result.card, result.trials

def _budget_word(row: dict) -> str:
    if not row["latency_seconds"]:
        return "free"
    return "hop = free" if row.get("same_as_free") else "hop"


def _append(path: Path, row: dict) -> None:
    with path.open("a") as handle:
        handle.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def _all_keep(free: Path, budget) -> bool:
    """Whether every candidate the finished free search at `free` trained keeps `budget`'s time."""
    from tinynas.study.journal import peek

    if not (free / "card.json").exists():
        return False
    trials = peek(free / "journal.sqlite")[0]
    return all(not any(v.startswith("time ") for v in budget.violations(t.architecture)) for t in trials)


def parse_budget(text: str) -> float:
    from tinynas.units import parse_duration

    return parse_duration(text)


def render_winners(args, rows: list[dict]) -> str:
    lines = ["# The default winners with and without the stream's time budget (issue 66)", "",
             f"Command: `nice python benchmarks/latency.py winners --seeds {args.seeds} --budget {args.budget} "
             f"--epochs {args.epochs} --final-epochs {args.final_epochs} --workers {args.workers}`. Per data set, "
             "built-in target and seed: a `fast` search with `--runtime auto` (the generated C runtime) and the "
             f"`chip` accounting, once with no time budget (`free`) and once with `--latency {HOP_SECONDS:g}s`, the "
             f"service's hop (`hop`: a candidate whose estimate + 25 % headroom is longer is refused before training; "
             "`hop = free`: every candidate the free search trained keeps the hop, so the hop search would draw the "
             "same candidates and is not run again). "
             f"Candidates race {args.epochs} epochs, the winner trains {args.final_epochs} (cosine); the int8 winner "
             "is measured on the split's test windows (CWRU 0 hp BearingNAS10 files, fan-end channel, 512-sample "
             "windows, `segment` split: a file's windows never on both sides; ISL June sessions, `session` split), "
             "count and Wilson 95 % interval. Instructions: the time model's estimate and QEMU's count "
             "(`-icount`) of the winner's generated C on the Cortex-M0 (micro:bit, where its RAM fits) and the "
             "Cortex-M4F (MPS2-AN386). ms, share of the hop and uJ: at the target's clock with its core's cycles "
             f"per instruction and run current (`tinynas targets`). Machine: 2 cores x86_64; {args.shared}.", "",
             "| data | target | core | seed | budget | winner | MACs | int8 accuracy (hits, 95 % interval) | "
             "M0 instr. est. / QEMU | M4F instr. est. / QEMU | per MAC M0 / M4F | ms at clock | share of hop | uJ | "
             "refused for time |",
             "|---|---|---|---:|---|---|---:|---|---|---|---|---:|---:|---:|---:|"]

    def pair(row, board):
        measured = row["measured"].get(board)
        return f"{row['estimated'][board] / 1e6:.2f} M / " + (f"{measured / 1e6:.2f} M" if measured else "-")

    for row in sorted(rows, key=lambda r: (r["data"], r["target"], r["seed"], r["latency_seconds"] or 0)):
        if row["winner"] is None:
            lines.append(f"| {row['data']} | {row['target']} | {row['core']} | {row['seed']} | "
                         f"{_budget_word(row)} | none: {row['why']} |" + " - |" * 9)
            continue
        accuracy = (f"{row['hits'] / row['windows']:.3f} ({row['hits']} of {row['windows']}, "
                    f"{row['interval'][0]:.3f}-{row['interval'][1]:.3f})" if row["windows"] else "-")
        per_mac = " / ".join(f"{row['measured'][b] / row['macs']:.2f}" if b in row["measured"] else "-"
                             for b in BOARDS)
        lines.append(f"| {row['data']} | {row['target']} | {row['core']} | {row['seed']} | "
                     f"{_budget_word(row)} | {row['winner']} | {row['macs']:,} | "
                     f"{accuracy} | "
                     f"{pair(row, 'microbit')} | {pair(row, 'mps2-an386')} | {per_mac} | "
                     f"{1000 * row['seconds_at_clock']:,.1f} | {100 * row['share_of_hop']:.0f} % | "
                     + (f"{row['energy_uj']:,.0f}" if row["energy_uj"] is not None else "?")
                     + f" | {row['refused_for_time']} of {row['candidates']} |")
    lines += ["", "## What keeping the stream costs, per target", "",
              "| data | target | free: mean accuracy | hop: mean accuracy | difference | free keeps the hop | "
              "hop: ms at clock (mean) |", "|---|---|---:|---:|---:|---|---:|"]
    groups = sorted({(r["data"], r["target"]) for r in rows})
    for data, target in groups:
        mine = [r for r in rows if (r["data"], r["target"]) == (data, target) and r.get("windows")]
        free = [r["hits"] / r["windows"] for r in mine if not r["latency_seconds"]]
        hop = [r["hits"] / r["windows"] for r in mine if r["latency_seconds"]]
        kept = sum(1 for r in mine if not r["latency_seconds"] and r["share_of_hop"] <= 1)
        hop_ms = [1000 * r["seconds_at_clock"] for r in mine if r["latency_seconds"]]
        if free and hop:
            lines.append(f"| {data} | {target} | {statistics.mean(free):.3f} ({len(free)} seeds) | "
                         f"{statistics.mean(hop):.3f} ({len(hop)} seeds) | "
                         f"{statistics.mean(hop) - statistics.mean(free):+.3f} | {kept} of {len(free)} | "
                         f"{statistics.mean(hop_ms):,.0f} |")
    won = [r for r in rows if r["winner"] is not None]
    m0 = [r["measured"]["microbit"] / r["macs"] for r in won if "microbit" in r["measured"]]
    m4 = [r["measured"]["mps2-an386"] / r["macs"] for r in won if "mps2-an386" in r["measured"]]
    errors = [r["estimated"][b] / r["measured"][b] - 1 for r in won for b in BOARDS if b in r["measured"]]
    if m0 and m4 and errors:
        lines += ["", f"Instructions per MAC of the winners (QEMU): Cortex-M0 {min(m0):.2f}-{max(m0):.2f} (median "
                  f"{statistics.median(m0):.2f}), Cortex-M4F {min(m4):.2f}-{max(m4):.2f} (median "
                  f"{statistics.median(m4):.2f}); goals 9 and 3. The time model's estimate against QEMU: "
                  f"{100 * min(errors):+.1f} % to {100 * max(errors):+.1f} % over {len(errors)} winner-and-core runs."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("fit")
    one.add_argument("--fit", type=int, default=120)
    one.add_argument("--check", type=int, default=40)
    one.add_argument("--seed", type=int, default=1)
    one.add_argument("--shared", default="nothing else running", help="what shared the machine (for the results)")
    one.set_defaults(func=cmd_fit)
    kernels = sub.add_parser("kernels")
    kernels.add_argument("--before-tree", required=True, help="a git worktree of the revision to compare with")
    kernels.add_argument("--label", default="the revision before", help="what the tree is, for the results")
    kernels.add_argument("--max-macs", type=int, default=2_600_000,
                         help="leave out larger winners (the old kernels' trace of one inference is GBs)")
    kernels.set_defaults(func=cmd_kernels)
    winners = sub.add_parser("winners")
    winners.add_argument("--data", default="cwru,isl")
    winners.add_argument("--targets", default="all")
    winners.add_argument("--seeds", default="0,1,2")
    winners.add_argument("--budget", default="20m", help="a cap: fast ends when its race does")
    winners.add_argument("--epochs", type=int, default=8)
    winners.add_argument("--final-epochs", type=int, default=20)
    winners.add_argument("--workers", type=int, default=2)
    winners.add_argument("--work", default="/tmp/tinynas-latency-winners", help="the searches' folders (resumable)")
    winners.add_argument("--resume", action="store_true", help="keep results/latency.jsonl's rows and go on")
    winners.add_argument("--shared", default="nothing else running")
    winners.add_argument("--render", action="store_true",
                         help="only write results/latency.md from results/latency.jsonl (a stopped run's rows)")
    winners.set_defaults(func=cmd_winners)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
