"""An exported int8 A(k, c) .tflite read into what the C runtime generator needs, without TensorFlow.

The .tflite is parsed with LiteRT's flatbuffer schema; its graph must be the A(k, c) chain CONV_2D,
(MAX_POOL_2D, CONV_2D)*, MEAN, FULLY_CONNECTED, or CodegenError says what is not. Every requantization
parameter is computed here as TFLite Micro's Prepare computes it (`c_quant`), so the generated C holds
integers only (`c_codegen`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynas.cost.c_runtime import CArenaPlan, plan_chain
from tinynas.deploy import c_quant
from tinynas.errors import TinynasError


class CodegenError(TinynasError, ValueError):
    """A model the C runtime generator cannot compile exactly (not an int8 A(k, c) graph)."""


@dataclass(frozen=True)
class Quantization:
    """Scale and zero point of an int8 activation tensor."""

    scale: float
    zero_point: int


@dataclass(frozen=True)
class ConvStage:
    """One CONV_2D with its fused activation, and the MAX_POOL_2D after it if any."""

    weights: np.ndarray  # int8 (cout, K, cin)
    bias: np.ndarray  # int32 (cout,)
    multipliers: tuple[int, ...]
    shifts: tuple[int, ...]
    rows: int
    input_offset: int
    output_offset: int
    act_min: int
    act_max: int
    pool: tuple[int, int] | None  # the pool's activation clamp, or None for the last conv (-> MEAN)

    @property
    def folded_bias(self) -> np.ndarray:
        """bias + input_offset * (sum of each output channel's weights), as int32 wraps."""
        sums = self.weights.astype(np.int64).reshape(self.cout, -1).sum(axis=1)
        folded = self.bias.astype(np.int64) + self.input_offset * sums
        return ((folded + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)

    @property
    def cin(self) -> int:
        return int(self.weights.shape[2])

    @property
    def cout(self) -> int:
        return int(self.weights.shape[0])


@dataclass(frozen=True)
class Head:
    """MEAN over time (folded multiplier) and the FULLY_CONNECTED layer."""

    mean_count: int
    mean_input_zero_point: int
    mean_output_zero_point: int
    mean_multiplier: int
    mean_shift: int
    weights: np.ndarray  # int8 (classes, channels)
    weights_offset: int
    bias: np.ndarray  # int32 (classes,)
    multipliers: tuple[int, ...]
    shifts: tuple[int, ...]
    input_offset: int
    output_offset: int
    act_min: int
    act_max: int


@dataclass(frozen=True)
class IntegerModel:
    """Everything the generated C needs, read from one int8 .tflite."""

    input_length: int
    input_channels: int
    kernel_size: int
    input: Quantization
    output: Quantization
    stages: tuple[ConvStage, ...]
    head: Head

    @property
    def classes(self) -> int:
        return int(self.head.weights.shape[0])

    @property
    def plan(self) -> CArenaPlan:
        lengths = tuple(stage.rows for stage in self.stages)
        return plan_chain(lengths, tuple(stage.cout for stage in self.stages), self.kernel_size)


_ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
_INT8, _INT32 = 9, 2  # TensorType enum values of the schema


def read_integer_model(tflite: bytes) -> IntegerModel:
    """Parse `tflite` into an IntegerModel, or raise CodegenError saying what is not supported."""
    try:
        return _read(bytes(tflite))
    except CodegenError:
        raise
    except (AttributeError, TypeError, IndexError, KeyError, ValueError) as exc:
        # A flatbuffer that parses but lacks what an A(k, c) export always has (options, quantization,
        # buffers): another tool's model, or a damaged one.
        raise CodegenError(f"not an int8 A(k, c) model tinynas exported ({type(exc).__name__} reading it)") from None


def _read(data: bytes) -> IntegerModel:
    from ai_edge_litert import schema_py_generated as schema

    if len(data) < 8 or data[4:8] != b"TFL3":
        raise CodegenError("not a TFLite model (no TFL3 identifier)")
    try:
        model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    except Exception as exc:  # a damaged flatbuffer raises anything from struct.error to IndexError
        raise CodegenError(f"cannot read the TFLite flatbuffer ({type(exc).__name__})") from None
    if not model.subgraphs or len(model.subgraphs) != 1:
        raise CodegenError("the C runtime compiles single-subgraph models only")
    graph = model.subgraphs[0]
    names = {value: key for key, value in vars(schema.BuiltinOperator).items() if not key.startswith("_")}

    def kind(op) -> str:
        code = model.operatorCodes[op.opcodeIndex]
        return names.get(max(code.builtinCode, code.deprecatedBuiltinCode), "?")

    ops = list(graph.operators)
    kinds = [kind(op) for op in ops]
    expected_tail = ["MEAN", "FULLY_CONNECTED"]
    body = kinds[:-2]
    if (kinds[-2:] != expected_tail or not body or body[0] != "CONV_2D" or len(body) % 2 != 1
            or any(k != ("CONV_2D" if i % 2 == 0 else "MAX_POOL_2D") for i, k in enumerate(body))):
        raise CodegenError(f"operators {' '.join(kinds)} are not an A(k, c) chain "
                           "(CONV_2D, (MAX_POOL_2D, CONV_2D)*, MEAN, FULLY_CONNECTED)")

    def tensor(index: int):
        return graph.tensors[int(index)]

    def constant(index: int, dtype) -> np.ndarray:
        t = tensor(index)
        raw = model.buffers[t.buffer].data
        if raw is None:
            raise CodegenError(f"tensor {index} should be constant but has no data")
        return np.frombuffer(np.asarray(raw, dtype=np.uint8).tobytes(), dtype=dtype).reshape(
            [int(d) for d in t.shape])

    def activation(index: int) -> Quantization:
        t = tensor(index)
        q = t.quantization
        if t.type != _INT8 or q is None or q.scale is None or len(q.scale) != 1:
            raise CodegenError(f"tensor {index} is not a per-tensor int8 activation")
        return Quantization(float(np.float32(q.scale[0])), int(q.zeroPoint[0]))

    def scales(index: int) -> np.ndarray:
        q = tensor(index).quantization
        if q is None or q.scale is None:
            raise CodegenError(f"tensor {index} has no quantization scales")
        return np.asarray(q.scale, dtype=np.float32)

    first = ops[0]
    input_shape = [int(d) for d in tensor(first.inputs[0]).shape]
    if len(input_shape) != 4 or input_shape[:2] != [1, 1]:
        raise CodegenError(f"model input has shape {input_shape}, expected (1, 1, T, C)")
    model_input = activation(first.inputs[0])
    stages: list[ConvStage] = []
    kernel_size = None
    rows = input_shape[2]
    index = 0
    while index < len(body):
        conv = ops[index]
        options = conv.builtinOptions
        if (options.padding != 0 or options.strideW != 1 or options.strideH != 1
                or options.dilationWFactor != 1 or options.dilationHFactor != 1):
            raise CodegenError("the C runtime compiles 'same' convolutions with stride 1 and no dilation only")
        weights = constant(conv.inputs[1], np.int8)
        if weights.ndim != 4 or weights.shape[1] != 1:
            raise CodegenError(f"conv weights of shape {weights.shape} are not 1xK")
        if kernel_size is None:
            kernel_size = int(weights.shape[2])
        elif weights.shape[2] != kernel_size:
            raise CodegenError("convolutions of different kernel sizes are not supported")
        if len(conv.inputs) < 3 or conv.inputs[2] < 0:
            raise CodegenError("a convolution without bias is not supported")
        bias = constant(conv.inputs[2], np.int32).reshape(-1)
        source, out = activation(conv.inputs[0]), activation(conv.outputs[0])
        filter_scales = scales(conv.inputs[1])
        if filter_scales.size == 1:
            filter_scales = np.repeat(filter_scales, weights.shape[0])
        pairs = c_quant.per_channel_multipliers(source.scale, filter_scales, out.scale)
        act = c_quant.activation_range(_ACTIVATIONS.get(options.fusedActivationFunction, "?"), out.scale,
                                       out.zero_point)
        pool = None
        if index + 1 < len(body):
            pool_op = ops[index + 1]
            pool_options = pool_op.builtinOptions
            if (pool_options.filterWidth, pool_options.filterHeight, pool_options.strideW,
                    pool_options.strideH, pool_options.padding) != (2, 1, 2, 1, 1):
                raise CodegenError("only 1x2 max-pools with stride 2 and 'valid' padding are supported")
            pooled = activation(pool_op.outputs[0])
            pool = c_quant.activation_range(_ACTIVATIONS.get(pool_options.fusedActivationFunction, "?"),
                                            pooled.scale, pooled.zero_point)
        stages.append(ConvStage(
            weights=weights.reshape(weights.shape[0], weights.shape[2], weights.shape[3]).copy(),
            bias=bias.copy(), multipliers=tuple(m for m, _ in pairs), shifts=tuple(s for _, s in pairs),
            rows=rows, input_offset=-source.zero_point, output_offset=out.zero_point,
            act_min=act[0], act_max=act[1], pool=pool))
        rows //= 2
        index += 2
    assert kernel_size is not None
    mean_op, dense = ops[-2], ops[-1]
    axes = constant(mean_op.inputs[1], np.int32).reshape(-1)
    if sorted(int(a) for a in axes) != [1, 2] or mean_op.builtinOptions.keepDims:
        raise CodegenError("MEAN must reduce axes 1 and 2 without keeping them")
    mean_in, mean_out = activation(mean_op.inputs[0]), activation(mean_op.outputs[0])
    count = stages[-1].rows
    mean_multiplier, mean_shift = c_quant.mean_multiplier(mean_in.scale, mean_out.scale, count)
    dense_in, dense_out = activation(dense.inputs[0]), activation(dense.outputs[0])
    dense_weights = constant(dense.inputs[1], np.int8)
    dense_scales = scales(dense.inputs[1])
    if dense_scales.size > 1:
        head_pairs = c_quant.per_channel_multipliers(dense_in.scale, dense_scales, dense_out.scale)
        weights_offset = 0  # the per-channel kernel ignores the filter zero point
    else:
        pair = c_quant.per_tensor_fc_multiplier(dense_in.scale, dense_scales[0], dense_out.scale)
        head_pairs = [pair] * dense_weights.shape[0]
        weights_offset = -int(tensor(dense.inputs[1]).quantization.zeroPoint[0])
    if len(dense.inputs) < 3 or dense.inputs[2] < 0:
        raise CodegenError("a dense layer without bias is not supported")
    dense_act = c_quant.activation_range(_ACTIVATIONS.get(dense.builtinOptions.fusedActivationFunction, "?"),
                                         dense_out.scale, dense_out.zero_point)
    head = Head(mean_count=count, mean_input_zero_point=mean_in.zero_point,
                mean_output_zero_point=mean_out.zero_point, mean_multiplier=mean_multiplier,
                mean_shift=mean_shift, weights=dense_weights.copy(), weights_offset=weights_offset,
                bias=constant(dense.inputs[2], np.int32).reshape(-1).copy(),
                multipliers=tuple(m for m, _ in head_pairs), shifts=tuple(s for _, s in head_pairs),
                input_offset=-dense_in.zero_point, output_offset=dense_out.zero_point,
                act_min=dense_act[0], act_max=dense_act[1])
    shifts = [s for stage in stages for s in stage.shifts] + list(head.shifts) + [head.mean_shift]
    if any(not -31 <= s <= 30 for s in shifts):
        raise CodegenError("a requantization shift is outside [-31, 30]: the model cannot be compiled exactly")
    return IntegerModel(input_length=input_shape[2], input_channels=input_shape[3], kernel_size=kernel_size,
                        input=model_input, output=activation(dense.outputs[0]), stages=tuple(stages), head=head)
