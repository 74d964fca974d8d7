"""How close the analytic cost model is to the real converter and TFLite Micro, and how fast.

    python benchmarks/cost_model.py --count 40 --seed 7

Converts `count` random architectures (both published input shapes, trained-like random
weights) to int8, measures each with tflite-micro's recording allocator, and compares head,
tail, total arena and flash with `tinynas.cost.estimate`. Also refits the flash constants on this set
(`--fit` prints what to paste into cost.py) and times the estimate against conversion.
Writes benchmarks/results/cost_model.md and .json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devtools/: not installed, beside tinynas

import numpy as np

from devtools.random_weights import calibration_windows, random_architectures, randomized_model
from tinynas.cost.estimate import ILP32, LP64, estimate, estimate_arena, flash_bytes
from tinynas.cost.graph import lower
from tinynas.deploy.export import convert_int8
from tinynas.deploy.measure import measure_arena, tflite_micro_available

RESULTS = Path(__file__).parent / "results"


def _flash_features(arch) -> tuple[float, float, float]:
    """(cells, quantized channels, aligned constant bytes) as used by cost.flash_bytes."""
    graph = lower(arch)
    data = sum(-(-t.nbytes // 16) * 16 for t in graph.tensors if t.constant)
    channels = sum(t.shape[0] if t.per_channel else 1
                   for t in graph.tensors if not (t.constant and not t.per_channel))
    return arch.c, channels, data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--fit", action="store_true", help="print refitted flash constants")
    args = parser.parse_args()
    if not tflite_micro_available():
        print("tflite-micro is not installed: nothing to compare against (pip install --pre tflite-micro)")
        return 0
    rows = []
    convert_seconds = 0.0
    for index, arch in enumerate(random_architectures(args.count, seed=args.seed, max_k=16, max_c=7)):
        tick = time.perf_counter()
        tflite = convert_int8(randomized_model(arch, seed=index), calibration_windows(arch, 16, seed=index))
        measured = measure_arena(tflite)
        convert_seconds += time.perf_counter() - tick
        host, mcu = estimate_arena(arch, LP64), estimate_arena(arch, ILP32)
        rows.append({
            "arch": arch.name(), "input": f"{arch.input_length}x{arch.input_channels}", "classes": arch.classes,
            "flash_measured": len(tflite), "flash_estimated": flash_bytes(arch),
            "head_measured": measured.arena_head_bytes, "head_estimated": host.head_bytes,
            "tail_measured": measured.arena_tail_bytes, "tail_estimated": host.tail_bytes,
            "total_measured": measured.arena_bytes, "total_estimated": host.total_bytes,
            "tail_ilp32": mcu.tail_bytes, "required_ilp32": mcu.required_bytes,
            "features": _flash_features(arch),
        })
        print(f"[{index + 1}/{args.count}] {arch.name()} {rows[-1]['input']}: flash {len(tflite)} "
              f"arena {measured.arena_bytes}", file=sys.stderr)

    archs = random_architectures(args.count, seed=args.seed, max_k=16, max_c=7)
    repeats = 200
    tick = time.perf_counter()
    for _ in range(repeats):
        for arch in archs:
            lower.cache_clear()
            estimate(arch, accounting="arena")
    estimate_seconds = (time.perf_counter() - tick) / (repeats * len(archs))
    per_conversion = convert_seconds / len(rows)

    def rel(a, b):
        return abs(a - b) / b

    head_exact = sum(r["head_measured"] == r["head_estimated"] for r in rows)
    tail_exact = sum(r["tail_measured"] == r["tail_estimated"] for r in rows)
    tail_err = max(rel(r["tail_estimated"], r["tail_measured"]) for r in rows)
    total_err = max(rel(r["total_estimated"], r["total_measured"]) for r in rows)
    flash_errs = [rel(r["flash_estimated"], r["flash_measured"]) for r in rows]
    ilp_ratio = np.mean([r["tail_ilp32"] / r["tail_measured"] for r in rows])
    ilp_total_ratio = np.mean([(r["head_estimated"] + r["tail_ilp32"]) / r["total_measured"] for r in rows])
    summary = {
        "command": f"python benchmarks/cost_model.py --count {args.count} --seed {args.seed}",
        "architectures": len(rows), "head_exact": head_exact, "tail_exact": tail_exact,
        "tail_max_rel_error": tail_err, "total_max_rel_error": total_err,
        "flash_max_rel_error": max(flash_errs), "flash_mean_rel_error": float(np.mean(flash_errs)),
        "ilp32_over_lp64_tail_mean": float(ilp_ratio), "ilp32_over_lp64_total_mean": float(ilp_total_ratio),
        "estimate_seconds": estimate_seconds, "convert_and_measure_seconds": per_conversion,
        "speed_ratio": per_conversion / estimate_seconds, "rows": rows,
    }
    if args.fit:
        features = np.array([r["features"] for r in rows], dtype=float)
        target = np.array([r["flash_measured"] for r in rows], dtype=float)
        fixed = target - 12 * features[:, 1] - features[:, 2]
        design = np.c_[np.ones(len(rows)), features[:, 0]]
        (constant, per_cell), *_ = np.linalg.lstsq(design, fixed, rcond=None)
        summary["flash_refit"] = {"FLASH_FIXED_BYTES": round(constant), "FLASH_PER_CELL_BYTES": round(per_cell)}
        print(f"refit: FLASH_FIXED_BYTES = {constant:.0f}, FLASH_PER_CELL_BYTES = {per_cell:.0f}")

    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cost_model.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        "# Analytic cost model vs converter + TFLite Micro",
        "",
        f"Command: `{summary['command']}` (TensorFlow converter, tflite-micro recording allocator, 64-bit x86 host).",
        f"{len(rows)} random architectures, 400x8 and 512x1 inputs, 2-26 classes, trained-like random weights.",
        "",
        "| quantity | result |",
        "|---|---|",
        f"| arena head exact | {head_exact}/{len(rows)} |",
        f"| arena tail exact (LP64) | {tail_exact}/{len(rows)}, max error {tail_err:.2%} |",
        f"| arena total max error | {total_err:.2%} |",
        f"| flash max / mean error | {max(flash_errs):.2%} / {np.mean(flash_errs):.2%} |",
        f"| 32-bit tail / 64-bit tail (mean) | {ilp_ratio:.2f} |",
        f"| 32-bit total / 64-bit total (mean) | {ilp_total_ratio:.2f} |",
        f"| estimate time | {estimate_seconds * 1e6:.0f} us (cold graph cache) |",
        f"| convert + measure time | {per_conversion:.2f} s |",
        f"| speed ratio | {per_conversion / estimate_seconds:,.0f}x |",
        "",
        "| arch | input | classes | flash meas/est | head meas/est | tail meas/est | tail 32-bit est |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['arch']} | {r['input']} | {r['classes']} | {r['flash_measured']}/{r['flash_estimated']} "
                     f"| {r['head_measured']}/{r['head_estimated']} | {r['tail_measured']}/{r['tail_estimated']} "
                     f"| {r['tail_ilp32']} |")
    (RESULTS / "cost_model.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:17]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
