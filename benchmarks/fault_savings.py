"""Search wall time saved by the training-health diagnoser when some candidates diverge.

    python benchmarks/fault_savings.py [--data cwru --target STM32F030F4P6 --epochs 40]

Runs the same search three times, side by side, with a learning-rate fault (x100) injected into
about a third of the candidates (those with (k + c) divisible by 3): with the health monitor and
the shipped diagnoser (diverging candidates stopped and retried once at a tenth of the learning
rate), with the diagnoser stopping them without a retry, and without any monitor (every candidate
trains its full epochs). Reports wall time, epochs trained, the
candidates diagnosed and the winner's int8 test accuracy. Writes benchmarks/results/fault_savings.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

from tinynas.cost.targets import get_target
from tinynas.data.spec import load_windows
from tinynas.progress import Progress
from tinynas.study import Study
from tinynas.training.diagnose import shipped_diagnoser
from tinynas.trial import Fidelity

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = {
    "cwru": f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=FE&windows_per_file=200&resample=0",
    "emg": "synthetic:emg?windows_per_class=60",
}


def _faulty(arch) -> str | None:
    return "lr_x100" if (arch.k + arch.c) % 3 == 0 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", choices=sorted(DATA), default="cwru")
    parser.add_argument("--target", default="STM32F030F4P6")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    spec = DATA[args.data]
    if spec.startswith("cwru:") and not (SHARED / "cwru").exists():
        print("../shared/data/cwru does not exist: nothing to measure")
        return 0
    if shipped_diagnoser() is None:
        print("no shipped diagnoser: run benchmarks/faults.py --save-model first", file=sys.stderr)
        return 1
    command = "python " + " ".join(shlex.quote(a) for a in ["benchmarks/fault_savings.py", *sys.argv[1:]])
    windows = load_windows(spec)
    target = get_target(args.target)
    fidelity = Fidelity(args.epochs, 16, args.learning_rate)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for mode in ("stop + retry", "stop, no retry", "off"):
            started = time.monotonic()
            result = Study(Path(scratch) / mode.replace(" ", "").replace(",", "").replace("+", "-"), windows,
                           target, strategy="paper", budget_seconds=3600, fidelity=fidelity,
                           final_fidelity=Fidelity(args.epochs, 16, args.learning_rate), workers=args.workers,
                           data_spec=spec, fault_for=_faulty, health=mode != "off",
                           retry_unstable=mode == "stop + retry", progress=Progress(interactive=False),
                           augment="none", kernels="3").run()
            trained = [t for t in result.trials if t.attempts]
            faulty = [t for t in trained if t.details.get("fault")]
            diagnosed = [t for t in trained if (t.details.get("first_attempt") or {}).get("diagnosis")
                         or t.details.get("diagnosis")]
            epochs = sum(len(t.val_loss) + len((t.details.get("first_attempt") or {}).get("health") or [])
                         for t in trained)
            rows.append({"mode": mode, "wall_seconds": round(time.monotonic() - started, 1),
                         "search_seconds": result.card.search["seconds"], "trained": len(trained),
                         "faulty": len(faulty), "diagnosed": len(diagnosed),
                         "diagnosed_faulty": sum(1 for t in diagnosed if t.details.get("fault")),
                         "epochs": epochs, "winner": result.winner.architecture.name(),
                         "int8_test_accuracy": result.card.int8_test_accuracy})
            print(rows[-1], file=sys.stderr, flush=True)
    retry, stop, off = rows
    lines = ["# Search time saved by the training-health diagnoser", "", f"Command: `{command}`", "",
             f"Data `{spec}`, target {target.name}, strategy `paper` at {args.epochs} epochs per candidate, lr "
             f"{args.learning_rate:g}, {args.workers} workers, {os.cpu_count()} cores x86_64. Fault: learning rate "
             "x100 in every candidate with (k + c) divisible by 3 (the retry keeps the fault, at a tenth of the "
             "rate).", "",
             "| health monitor + diagnoser | search s | candidates trained (with the fault) | diagnosed "
             "(of them faulty) | epochs trained | winner | int8 test acc |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['search_seconds']:.0f} | {r['trained']} ({r['faulty']}) | "
                     f"{r['diagnosed']} ({r['diagnosed_faulty']}) | {r['epochs']} | {r['winner']} | "
                     f"{r['int8_test_accuracy']:.3f} |")
    lines += ["", "Search time relative to no monitor: "
              f"stop + retry {retry['search_seconds'] / off['search_seconds']:.2f}x, "
              f"stop without retry {stop['search_seconds'] / off['search_seconds']:.2f}x (the monitor's own overhead "
              "is included; a retry trains the candidate again, at a safer learning rate).", ""]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fault_savings.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "fault_savings.json").write_text(json.dumps({"command": command, "rows": rows}, indent=2) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
