"""Compare the Cortex-M4 TFLM measurements (run.log from main.cc under QEMU) with the cost model.

Reads BUILD/run.log and BUILD/expected.json (make_models.py) and prints Markdown tables: measured
head/tail/used/minimum arena against `estimate_arena(arch, ILP32)`; the same replay fed the struct sizes
this build printed; the RecordingMicroAllocator's categories; the struct sizes. It also runs each model
in the tflite_micro wheel on the same all-zero-point input and checks the Cortex-M4 output is identical.

Usage: python benchmarks/tflm_arm/report.py BUILD [LABEL]
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from tinynas.cost.estimate import ILP32, Abi, estimate_arena
from tinynas.space import Architecture


def measured_abi(sizes: dict[str, tuple[int, int]], recording: bool) -> Abi:
    """ILP32 with the struct sizes this build printed (plain or recording allocator objects)."""
    def size(name: str) -> int:
        return sizes[name][0]

    def options(name: str) -> tuple[int, int]:
        return sizes[name]

    buffers = "tflite::RecordingSingleArenaBufferAllocator" if recording else "tflite::SingleArenaBufferAllocator"
    micro = "tflite::RecordingMicroAllocator" if recording else "tflite::MicroAllocator"
    return replace(
        ILP32, name="measured", eval_tensor=size("TfLiteEvalTensor"),
        node_and_registration=size("tflite::NodeAndRegistration"), tflite_tensor=size("TfLiteTensor"),
        affine_quantization=size("TfLiteAffineQuantization"),
        allocator_objects=(size(buffers), size("tflite::GreedyMemoryPlanner"), size(micro),
                           size("BuiltinDataAllocatorMirror")),
        subgraph_allocations=size("tflite::SubgraphAllocations"), scratch_handle=size("tflite::ScratchBufferHandle"),
        scratch_request=size("tflite::internal::ScratchBufferRequest"), allocation_info=size("tflite::AllocationInfo"),
        op_data={"CONV_2D": size("tflite::OpDataConv"), "MAX_POOL_2D": size("tflite::OpDataPooling"),
                 "MEAN": size("tflite::OpDataReduce"), "FULLY_CONNECTED": size("tflite::OpDataFullyConnected")},
        builtin_options={"CONV_2D": options("TfLiteConvParams"), "MAX_POOL_2D": options("TfLitePoolParams"),
                         "MEAN": options("TfLiteReducerParams"),
                         "FULLY_CONNECTED": options("TfLiteFullyConnectedParams")})


def parse(log: str) -> tuple[dict[str, tuple[int, int]], list[dict]]:
    """(sizes by struct name, one dict per model) from main.cc's output."""
    sizes = {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"^sizeof (\S+)=(\d+) align=(\d+)$", log, re.M)}
    models = []
    for block in log.split("model=")[1:]:
        entry = {"name": block.split(" bytes=")[0], "categories": {}}
        for key, value in re.findall(r"(\w+)=(-?\d+)(?=\s)", block):
            entry.setdefault(key, int(value))
        entry["output"] = [int(v) for v in re.search(r"^output=(\S+)$", block, re.M)[1].split(",")]
        for m in re.finditer(r"^category (\w+) requested=(\d+) used=(\d+) count=(\d+)$", block, re.M):
            entry["categories"][m[1]] = (int(m[2]), int(m[3]), int(m[4]))
        models.append(entry)
    return sizes, models


def wheel_output(tflite: bytes) -> list[int]:
    """The tflite_micro wheel's int8 output for an input filled with the input zero point."""
    from tflite_micro.python.tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(tflite)
    detail = interpreter.get_input_details(0)
    zero_point = int(detail["quantization_parameters"]["zero_points"][0])
    interpreter.set_input(np.full(detail["shape"], zero_point, dtype=np.int8), 0)
    interpreter.invoke()
    return [int(v) for v in interpreter.get_output(0).reshape(-1)]


def main(build: Path, label: str) -> None:
    sizes, models = parse((build / "run.log").read_text())
    expected = {e["name"]: e for e in json.loads((build / "expected.json").read_text())}
    print(f"### {label}\n")
    print("| model | head meas / est | tail meas / est ILP32 | used meas / est | min arena meas / est required "
          "| tail recording | output = wheel |")
    print("|---|---|---|---|---|---|---|")
    for m in models:
        e = expected[m["name"]]
        est = e["ilp32"]
        same = m["output"] == wheel_output((build / f"model{e['index']}.tflite").read_bytes())
        print(f"| {m['name']} | {m['plain_head']} / {est['head_bytes']} | {m['plain_tail']} / {est['tail_bytes']} "
              f"({m['plain_tail'] - est['tail_bytes']:+d}) | {m['plain_used']} / {est['total_bytes']} "
              f"| {m['min_arena']} / {est['required_bytes']} | {m['recording_tail']} | {'yes' if same else 'NO'} |")
    plain, recording = measured_abi(sizes, False), measured_abi(sizes, True)
    print("\nThe cost model's replay (`estimate_arena`) fed this build's struct sizes instead of ILP32's:\n")
    print("| model | tail meas / replay | recording tail meas / replay | used meas / replay "
          "| min arena meas / replay required |")
    print("|---|---|---|---|---|")
    for m in models:
        arch = Architecture.from_dict(expected[m["name"]]["arch"])
        p, r = estimate_arena(arch, plain), estimate_arena(arch, recording)
        print(f"| {m['name']} | {m['plain_tail']} / {p.tail_bytes} | {m['recording_tail']} / {r.tail_bytes} "
              f"| {m['plain_used']} / {p.total_bytes} | {m['min_arena']} / {p.required_bytes} |")
    print("\nRecordingMicroAllocator categories (requested / used bytes, count):\n")
    names = list(models[0]["categories"])
    print("| model | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for m in models:
        cells = [f"{r} / {u} ({c})" for r, u, c in (m["categories"][n] for n in names)]
        print(f"| {m['name']} | " + " | ".join(cells) + " |")
    print("\nStruct sizes (sizeof / alignof):\n")
    print("| struct | bytes | align |")
    print("|---|---|---|")
    for name, (size, align) in sizes.items():
        print(f"| `{name}` | {size} | {align} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else sys.argv[1])
