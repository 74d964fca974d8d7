"""The method's shipped CWRU models against tinynas's winners, on windows neither has seen (issue 37).

    python benchmarks/reproduce_cwru.py --out /tmp/repro_cwru        # tinynas's winners (method's accounting)
    python benchmarks/method_models.py --models BearingNAS/resulting_models --ours /tmp/repro_cwru

The method's authors (BearingNAS, public code) ship one int8 model per target (`resulting_models/*.tflite`,
uint8 input and output). They were trained on a random 160 of the first 200 512-sample windows of each file
(`build_numpy_dataset.py`: a random permutation), so the paper split's test windows (windows 160-199 by time,
which tinynas tests on) were in their training set for ~80 % of them. The clean windows for both are the
ones after the first 200 of each file: 36 per file (the 12 kHz files hold 236 windows of 512 samples), 360
in all, fan-end channel, the normal file kept at 48 kHz as both treated it. Each model gets the input its
maker gave it: the raw signal for the method's (its input quantization is set on raw values), tinynas's
card's preprocessing for tinynas's. RAM is counted by the method's own rule (the 64-bit TFLite Micro arena,
measured here with tflite-micro, rounded up to 512 B) for both. The shipped files are not in this
repository: give the folder they are in.
"""

from __future__ import annotations

import argparse
import json
import sys
from math import sqrt
from pathlib import Path

import numpy as np

from tinynas.data.spec import load_windows

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
THEIR_ORDER = (118, 185, 222, 105, 169, 209, 144, 130, 156, 97)
"""The shipped models' output order (`build_numpy_dataset.py`'s file list)."""
SEEN = 200
"""Windows per file the method's models could have trained on (and tinynas's paper split used)."""


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson interval of hits / n."""
    p, d = hits / n, 1 + z * z / n
    centre, half = (p + z * z / (2 * n)) / d, z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return centre - half, centre + half


def clean_windows(folder: Path):
    """The windows after the first SEEN of each file, the same count from every file."""
    windows = load_windows(f"cwru:{folder}?files=bearingnas10&channel=FE&window=512&resample=0")
    later = windows.time_index >= SEEN * 512
    per_file = min(int(np.sum(later & (windows.groups == g))) for g in np.unique(windows.groups))
    keep = np.concatenate([np.flatnonzero(later & (windows.groups == g))[:per_file]
                           for g in np.unique(windows.groups)])
    return windows.subset(np.sort(keep)), per_file


def shipped_accuracy(path: Path, windows) -> dict:
    """The shipped model on raw windows, its outputs mapped to tinynas's class names by file."""
    from ai_edge_litert.interpreter import Interpreter

    from tinynas.cost.estimate import method_rounding
    from tinynas.deploy.measure import measure_arena

    tflite = path.read_bytes()
    interpreter = Interpreter(model_content=tflite)
    interpreter.allocate_tensors()
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    scale, zero = inp["quantization"]
    info = np.iinfo(inp["dtype"])
    truth = np.array([THEIR_ORDER.index(int(g)) for g in windows.groups])
    hits = 0
    for x, label in zip(windows.x, truth):
        q = np.clip(np.round(x.reshape(inp["shape"]) / scale) + zero, info.min, info.max).astype(inp["dtype"])
        interpreter.set_tensor(inp["index"], q)
        interpreter.invoke()
        hits += int(np.argmax(interpreter.get_tensor(out["index"])[0]) == label)
    arena = measure_arena(tflite).arena_bytes
    return {"hits": hits, "n": len(truth), "accuracy": hits / len(truth), "arena_host64": arena,
            "method_ram_bytes": method_rounding(arena), "tflite_bytes": len(tflite)}


def ours_accuracy(folder: Path, windows) -> dict:
    from tinynas.cost.estimate import method_rounding
    from tinynas.deploy.evaluate import evaluate
    from tinynas.deploy.measure import measure_arena

    result = evaluate(folder, windows)
    card = json.loads((folder / "card.json").read_text())
    arena = measure_arena((folder / "model.tflite").read_bytes()).arena_bytes
    hits = int(round(result.accuracy * result.n_windows))
    return {"name": card.get("name"), "hits": hits, "n": result.n_windows, "accuracy": result.accuracy,
            "arena_host64": arena, "method_ram_bytes": method_rounding(arena),
            "tflite_bytes": (folder / "model.tflite").stat().st_size}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", required=True, help="folder with the method's shipped TARGET.tflite files")
    parser.add_argument("--ours", required=True, help="reproduce_cwru.py --out folder (one folder per target)")
    parser.add_argument("--data", default=str(SHARED / "cwru"))
    args = parser.parse_args()
    windows, per_file = clean_windows(Path(args.data))
    rows = []
    for shipped in sorted(Path(args.models).glob("*.tflite")):
        target = shipped.stem
        theirs = shipped_accuracy(shipped, windows)
        ours = ours_accuracy(Path(args.ours) / target, windows) if (Path(args.ours) / target).exists() else None
        rows.append({"target": target, "method": theirs, "tinynas": ours})
        print(json.dumps(rows[-1]), flush=True)
    lines = ["# The method's shipped CWRU models and tinynas's winners, on windows neither has seen", "",
             f"Command: `python benchmarks/method_models.py --models BearingNAS/resulting_models --ours "
             f"{args.ours}` (tinynas's winners from `python benchmarks/reproduce_cwru.py --out {args.ours}`: "
             f"`paper`, 15 epochs per candidate, seed 0, budgeted by the method's accounting).",
             f"Windows: CWRU bearingnas10, fan end, 512 samples, the {per_file} windows after the first {SEEN} of each "
             f"of the 10 files ({len(windows)} in all): the method's models trained on a random 160 of the first "
             f"{SEEN}, tinynas's on the first 144 (validation 16, test 40). RAM by the method's rule for both: the "
             f"64-bit TFLite Micro arena measured with tflite-micro, rounded up to 512 B. Accuracy with its 95 % "
             f"Wilson interval.", "",
             "| target | method's shipped model: accuracy | RAM (method's rule) | .tflite | tinynas's winner: "
             "accuracy | RAM (method's rule) | .tflite |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        m, o = r["method"], r["tinynas"]
        lo, hi = wilson(m["hits"], m["n"])
        mine = "not run" if o is None else (
            f"{o['name']} {o['accuracy']:.3f} ({wilson(o['hits'], o['n'])[0]:.3f}-{wilson(o['hits'], o['n'])[1]:.3f})"
            f" | {o['method_ram_bytes']:,} B | {o['tflite_bytes']:,} B")
        lines.append(f"| {r['target']} | {m['accuracy']:.3f} ({lo:.3f}-{hi:.3f}) | {m['method_ram_bytes']:,} B "
                     f"| {m['tflite_bytes']:,} B | {mine} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "method-models.json").write_text(json.dumps({"windows": len(windows), "per_file": per_file,
                                                            "rows": rows}, indent=2) + "\n")
    (RESULTS / "method-models.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
