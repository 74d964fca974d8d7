"""Random int8 A(k, c) models made directly as the C generator's `IntegerModel`, without TensorFlow.

What the generated C runtime executes depends on the shapes (and, a little, on the data through its clamps and
roundings), not on how the weights were learnt; so the time model (`tinynas.cost.latency`) is fitted and checked
on models made here in milliseconds, where a converted Keras model takes seconds. The requantization parameters
come from `c_quant` as the converter's scales would give them, so every code path of the kernels runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinynas.cost.c_runtime import estimate_c
from tinynas.deploy import c_quant
from tinynas.deploy.c_model import ConvStage, Head, IntegerModel, Quantization
from tinynas.space import Architecture, max_cells


def random_integer_model(arch: Architecture, seed: int) -> IntegerModel:
    """An IntegerModel of `arch` with random int8 weights and realistic requantization (ReLU activations)."""
    rng = np.random.default_rng(seed)
    stages = []
    cin, rows = arch.input_channels, arch.input_length
    input_zero = int(rng.integers(-20, 20))
    for index, cout in enumerate(arch.filters):
        weights = rng.integers(-127, 128, size=(cout, arch.kernel_size, cin), dtype=np.int8)
        scale_in, scale_out = float(rng.uniform(0.01, 0.1)), float(rng.uniform(0.02, 0.2))
        filter_scales = rng.uniform(0.001, 0.01, size=cout)
        if rng.random() < 0.2:  # an output scale below input x filter: multipliers > 1, a left shift
            scale_out = float(scale_in * filter_scales.max() / rng.uniform(1.5, 8.0))
        pairs = c_quant.per_channel_multipliers(scale_in, filter_scales, scale_out)
        output_zero = -128  # ReLU outputs start at the bottom of the int8 range, as the converter places them
        act = c_quant.activation_range("RELU", scale_out, output_zero)
        pooled = index + 1 < len(arch.filters)
        stages.append(ConvStage(
            weights=weights, bias=rng.integers(-5000, 5000, size=cout).astype(np.int32),
            multipliers=tuple(m for m, _ in pairs), shifts=tuple(s for _, s in pairs), rows=rows,
            input_offset=-(input_zero if index == 0 else output_zero), output_offset=output_zero,
            act_min=act[0], act_max=act[1], pool=act if pooled else None))
        cin, rows = cout, rows // 2
    count = stages[-1].rows
    mean_multiplier, mean_shift = c_quant.mean_multiplier(0.05, 0.04, count)
    head_pairs = c_quant.per_channel_multipliers(0.04, rng.uniform(0.001, 0.01, size=arch.classes), 0.1)
    head = Head(mean_count=count, mean_input_zero_point=-128, mean_output_zero_point=-128,
                mean_multiplier=mean_multiplier, mean_shift=mean_shift,
                weights=rng.integers(-127, 128, size=(arch.classes, cin), dtype=np.int8), weights_offset=0,
                bias=rng.integers(-2000, 2000, size=arch.classes).astype(np.int32),
                multipliers=tuple(m for m, _ in head_pairs), shifts=tuple(s for _, s in head_pairs),
                input_offset=128, output_offset=int(rng.integers(-10, 10)), act_min=-128, act_max=127)
    return IntegerModel(input_length=arch.input_length, input_channels=arch.input_channels,
                        kernel_size=arch.kernel_size, input=Quantization(0.05, input_zero),
                        output=Quantization(0.1, head.output_offset), stages=tuple(stages), head=head)


def _requantize(x: np.ndarray, multiplier, shift) -> np.ndarray:
    """TFLite Micro's MultiplyByQuantizedMultiplier (double rounding), vectorised, int32 wrap-around included."""
    shift = np.asarray(shift, dtype=np.int64)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    shifted = ((np.asarray(x, dtype=np.int64) << left) + (1 << 31)) % (1 << 32) - (1 << 31)  # int32 wraps
    high = (shifted * np.asarray(multiplier, dtype=np.int64) + (1 << 30)) >> 31
    mask = (np.int64(1) << right) - 1
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + ((high & mask) > threshold)


def reference_outputs(model: IntegerModel, inputs: np.ndarray) -> np.ndarray:
    """The int8 outputs of `model` computed as TFLite Micro's reference kernels compute them, op by op (every conv
    output requantized, then the max-pool of int8 values; MEAN; FULLY_CONNECTED), in numpy: the C runtime's
    fusions and shortcuts are checked against this."""
    from tinynas.cost.c_runtime import pad_left

    outputs = []
    for window in np.asarray(inputs, dtype=np.int64).reshape(len(inputs), model.input_length, model.input_channels):
        x = window
        sums = None
        for stage in model.stages:
            kernel = stage.weights.shape[1]
            padded = np.zeros((stage.rows + kernel - 1, stage.cin), dtype=np.int64)
            padded[pad_left(kernel):pad_left(kernel) + stage.rows] = x + stage.input_offset
            taps = np.lib.stride_tricks.sliding_window_view(padded, (kernel, stage.cin))[:, 0]
            acc = np.einsum("tkc,okc->to", taps, stage.weights.astype(np.int64)) + stage.bias.astype(np.int64)
            q = _requantize(acc, stage.multipliers, stage.shifts) + stage.output_offset
            q = np.clip(q, stage.act_min, stage.act_max)
            if stage.pool is not None:
                half = stage.rows // 2
                x = np.clip(np.maximum(q[0:2 * half:2], q[1:2 * half:2]), *stage.pool)
            else:
                sums = q.sum(axis=0)
        head = model.head
        assert sums is not None
        centred = sums - head.mean_input_zero_point * head.mean_count
        features = np.clip(_requantize(centred, head.mean_multiplier, head.mean_shift) + head.mean_output_zero_point,
                           -128, 127)
        acc = ((head.weights.astype(np.int64) + head.weights_offset) * (features + head.input_offset)).sum(axis=1)
        acc = _requantize(acc + head.bias.astype(np.int64), head.multipliers, head.shifts) + head.output_offset
        outputs.append(np.clip(acc, head.act_min, head.act_max))
    return np.array(outputs, dtype=np.int8)


SHAPES = ((400, 8), (512, 1), (128, 3), (250, 6), (75, 2))
"""The published input shapes (ISL 400 x 8, CWRU 512 x 1) and others a person's sensor gives."""


def random_time_architectures(count: int, seed: int, shapes=SHAPES) -> list[Architecture]:
    """`count` architectures over `shapes`, with k, c, kernel size and classes drawn as a search meets them."""
    rng = np.random.default_rng(seed)
    found: list[Architecture] = []
    while len(found) < count:
        length, channels = shapes[len(found) % len(shapes)]
        arch = Architecture(length, channels, int(rng.choice((2, 4, 6, 10, 26))), k=int(rng.integers(1, 33)),
                            c=int(rng.integers(0, min(max_cells(length), 7) + 1)),
                            kernel_size=int(rng.choice((1, 3, 3, 5, 9))))
        cost = estimate_c(arch)
        # What the micro:bit (16 KiB RAM, 256 KiB flash) holds beside the harness: the smaller emulated board.
        if cost.ram_bytes <= MAX_RAM_BYTES and cost.flash_bytes <= MAX_FLASH_BYTES:
            found.append(arch)
    return found


MAX_RAM_BYTES = 12 << 10
MAX_FLASH_BYTES = 200 << 10
BOARDS = ("microbit", "mps2-an386")
"""The two emulated cores: Cortex-M0 (Armv6-M) and Cortex-M4F (Armv7E-M, DSP extension)."""


@dataclass(frozen=True)
class Counted:
    """One model's generated C on one emulated core: instructions per inference, and whether every window gave the
    host build's outputs and the reference kernels' (`reference_outputs`)."""

    board: str
    instructions: float
    identical: bool
    stack_bytes: int
    code_bytes: int


def count_on_cores(arch: Architecture, seed: int, workdir: Path, windows: int = 2,
                   boards: tuple[str, ...] = BOARDS) -> list[Counted]:
    """Generate the C of a random integer model of `arch`, run `windows` random windows through it on each
    emulated core (QEMU, -icount) and on the host; what each core counted."""
    from devtools.emulate import run_on_qemu
    from tinynas.deploy.c_codegen import generate_c
    from tinynas.hil.host import host_outputs

    model = random_integer_model(arch, seed)
    source, header = generate_c(model)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "model_compiled.c").write_text(source)
    (workdir / "model_compiled.h").write_text(header)
    rng = np.random.default_rng(seed)
    inputs = rng.integers(-128, 128, size=(windows, arch.input_length * arch.input_channels), dtype=np.int8)
    expected = host_outputs(source.encode(), header.encode(), "model_compiled.h", "tinynas", inputs)
    reference = bool((reference_outputs(model, inputs) == expected).all())
    found = []
    for board in boards:
        run = run_on_qemu(workdir / "model_compiled.c", workdir / "model_compiled.h", inputs, board,
                          workdir / board, timeout=600)
        found.append(Counted(board, run.instructions_mean, reference and bool((run.outputs == expected).all()),
                             run.stack_peak,
                             run.model.text))
    return found
