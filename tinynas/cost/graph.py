"""The int8 operator graph an `Architecture` lowers to, computed without TensorFlow.

This is the graph the TFLite converter emits for `tinynas.deploy.network.build_model` after batch-norm
folding and ReLU fusion: CONV_2D (stem), then per cell MAX_POOL_2D and CONV_2D, then MEAN
(global average pooling) and FULLY_CONNECTED. The cost model plans memory and counts bytes
over it; tests check it against the converter's real output.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tinynas.space import Architecture


@dataclass(frozen=True)
class Tensor:
    """One tensor of the int8 graph; `constant` tensors live in flash, the others in the arena."""

    name: str
    shape: tuple[int, ...]
    itemsize: int
    constant: bool
    per_channel: bool = False

    @property
    def elements(self) -> int:
        """Number of elements."""
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def nbytes(self) -> int:
        """Bytes of data."""
        return self.elements * self.itemsize


@dataclass(frozen=True)
class Operator:
    """One operator: its builtin name and the indices of its input and output tensors."""

    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class Graph:
    """Tensors and operators in execution order; tensor 0 is the model input."""

    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    input_index: int
    output_index: int


@functools.lru_cache(maxsize=4096)
def lower(arch: Architecture) -> Graph:
    """Lower `arch` to the int8 graph the converter produces for it (cached: it is immutable)."""
    tensors: list[Tensor] = []
    operators: list[Operator] = []

    def add(name: str, shape: tuple[int, ...], itemsize: int = 1, constant: bool = False,
            per_channel: bool = False) -> int:
        tensors.append(Tensor(name, shape, itemsize, constant, per_channel))
        return len(tensors) - 1

    length, channels = arch.input_length, arch.input_channels
    current = add("window", (1, 1, length, channels))
    for index, filters in enumerate(arch.filters):
        if index > 0:
            length //= 2
            pooled = add(f"cell{index}_pool", (1, 1, length, channels))
            operators.append(Operator("MAX_POOL_2D", (current,), (pooled,)))
            current = pooled
        weights = add(f"conv{index}_weights", (filters, 1, arch.kernel_size, channels),
                      constant=True, per_channel=True)
        bias = add(f"conv{index}_bias", (filters,), itemsize=4, constant=True, per_channel=True)
        out = add(f"conv{index}_out", (1, 1, length, filters))
        operators.append(Operator("CONV_2D", (current, weights, bias), (out,)))
        current, channels = out, filters
    axes = add("mean_axes", (2,), itemsize=4, constant=True)
    pooled = add("gap", (1, channels))
    operators.append(Operator("MEAN", (current, axes), (pooled,)))
    # Recent converters quantize the dense weights per output channel too.
    weights = add("head_weights", (arch.classes, channels), constant=True, per_channel=True)
    bias = add("head_bias", (arch.classes,), itemsize=4, constant=True, per_channel=True)
    logits = add("logits", (1, arch.classes))
    operators.append(Operator("FULLY_CONNECTED", (pooled, weights, bias), (logits,)))
    return Graph(tuple(tensors), tuple(operators), input_index=0, output_index=logits)
