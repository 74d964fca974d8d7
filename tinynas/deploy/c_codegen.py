"""Generate standalone C99 for an exported int8 A(k, c) model: no interpreter, no allocation, no floats.

The .tflite is read with LiteRT's flatbuffer schema (no TensorFlow); its graph must be the A(k, c) chain
CONV_2D, (MAX_POOL_2D, CONV_2D)*, MEAN, FULLY_CONNECTED. Every requantization parameter is computed here,
exactly as TFLite Micro's Prepare computes it (`c_quant`), and stored in flash with the weights; the C code
then repeats the reference kernels' integer arithmetic in the same order, so its outputs are TFLite
Micro's, bit for bit (`tests/deploy/test_c_codegen.py`). Each conv is fused with its ReLU and the next
max-pool (or with the MEAN's sums, for the last one) and the activations live in one static arena laid
out by `tinynas.cost.c_runtime` (maps overlap where the plan proves it safe).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynas.cost.c_runtime import CArenaPlan, pad_left, plan_chain
from tinynas.deploy import c_quant
from tinynas.errors import TinynasError

ENTRY_POINT = "tinynas_infer"


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
    from ai_edge_litert import schema_py_generated as schema

    data = bytes(tflite)
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


def _array(ctype: str, name: str, values, per_line: int = 16) -> str:
    flat = [int(v) for v in np.asarray(values).reshape(-1)]
    rows = [", ".join(str(v) for v in flat[i:i + per_line]) for i in range(0, len(flat), per_line)]
    return f"static const {ctype} {name}[{len(flat)}] = {{\n  " + ",\n  ".join(rows) + "\n};\n"


_RUNTIME = r"""
/* MultiplyByQuantizedMultiplier as TFLite Micro's default build computes it: two roundings. */
static int32_t high_mul(int32_t a, int32_t b) {
  /* gemmlowp's SaturatingRoundingDoublingHighMul. (ab + nudge) / 2^31 truncated equals the arithmetic
   * shift (ab + 2^30) >> 31 for every ab, which avoids a 64-bit division on cores without one. */
  if (a == b && a == INT32_MIN) return INT32_MAX;
  return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}

static int32_t divide_by_pot(int32_t x, int exponent) {
  /* gemmlowp's RoundingDivideByPOT: ties away from zero. */
  const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

static int32_t requantize(int32_t x, int32_t multiplier, int shift) {
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  return divide_by_pot(high_mul(x * (1 << left), multiplier), right);
}

static int32_t clamp(int32_t x, int32_t low, int32_t high) {
  return x < low ? low : (x > high ? high : x);
}

typedef struct {
  const int8_t *weights;     /* [cout][KERNEL_SIZE][cin] */
  const int32_t *bias;       /* [cout] */
  const int32_t *folded_bias; /* [cout] bias + input_offset * (sum of the channel's weights) */
  const int32_t *multiplier; /* [cout] Q31 */
  const int8_t *shift;       /* [cout] > 0: left */
  int32_t input_offset, output_offset, act_min, act_max, pool_min, pool_max;
  int rows, cin, cout;
} conv_stage;

static int32_t dot(const int8_t *a, const int8_t *b, int n) {
  int32_t acc = 0;
  while (n-- > 0) acc += (int32_t)*a++ * (int32_t)*b++;
  return acc;
}

/* One output of the 'same' 1xK conv (+ its ReLU clamp) at time x, channel o: TFLite Micro's
 * ConvPerChannel for that element, which sums w * (x + input_offset) over the taps inside the window
 * (padded taps are skipped). Here the taps inside are one contiguous run of rows and of weights, so the
 * sum is one dot product plus input_offset * (sum of those weights), folded into the bias away from the
 * edges: the same int32, in two's complement whatever the order of the additions. */
static int32_t conv_at(const conv_stage *s, const int8_t *in, int x, int o) {
  const int cin = s->cin;
  const int8_t *w = s->weights + o * KERNEL_SIZE * cin;
  const int first = x - PAD_LEFT;
  const int k0 = first < 0 ? -first : 0;
  const int k1 = first + KERNEL_SIZE > s->rows ? s->rows - first : KERNEL_SIZE;
  int32_t acc;
  if (k0 == 0 && k1 == KERNEL_SIZE) {
    acc = s->folded_bias[o];
  } else {
    int32_t weight_sum = 0;
    for (int n = k0 * cin; n < k1 * cin; ++n) weight_sum += w[n];
    acc = s->bias[o] + weight_sum * s->input_offset;
  }
  acc += dot(w + k0 * cin, in + (first + k0) * cin, (k1 - k0) * cin);
  acc = requantize(acc, s->multiplier[o], s->shift[o]) + s->output_offset;
  return clamp(acc, s->act_min, s->act_max);
}
"""

_CONV_POOL = r"""
/* conv + ReLU + 1x2 max-pool: only the pooled map is stored. Pooled row j is written while input rows
 * from 2j - PAD_LEFT on are still read; the arena plan puts the output low enough never to touch them. */
static void conv_pool(const conv_stage *s, const int8_t *in, int8_t *out) {
  const int pooled = s->rows / 2;
  for (int j = 0; j < pooled; ++j) {
    for (int o = 0; o < s->cout; ++o) {
      const int32_t a = conv_at(s, in, 2 * j, o);
      const int32_t b = conv_at(s, in, 2 * j + 1, o);
      out[j * s->cout + o] = (int8_t)clamp(a > b ? a : b, s->pool_min, s->pool_max);
    }
  }
}
"""

_CONV_SUM = r"""
/* The last conv + ReLU straight into MEAN's int32 sums: its map is never stored. */
static void conv_sum(const conv_stage *s, const int8_t *in, int32_t *sums) {
  for (int o = 0; o < s->cout; ++o) sums[o] = 0;
  for (int x = 0; x < s->rows; ++x) {
    for (int o = 0; o < s->cout; ++o) sums[o] += conv_at(s, in, x, o);
  }
}
"""


def _conv_initializer(name: str, stage: ConvStage) -> str:
    pool_min, pool_max = stage.pool if stage.pool is not None else (c_quant.INT8_MIN, c_quant.INT8_MAX)
    return (f"static const conv_stage {name} = {{\n"
            f"  {name}_weights, {name}_bias, {name}_folded_bias, {name}_multiplier, {name}_shift,\n"
            f"  {stage.input_offset}, {stage.output_offset}, {stage.act_min}, {stage.act_max}, "
            f"{pool_min}, {pool_max},\n"
            f"  {stage.rows}, {stage.cin}, {stage.cout}\n}};\n")


def _float_literal(value: float) -> str:
    return f"{np.float32(value)!r}".replace("np.float32(", "").rstrip(")") + "f"


def generate_c(model: IntegerModel, header_name: str = "model_compiled.h", title: str = "") -> tuple[str, str]:
    """(source, header) of the C runtime for `model`; `title` goes in the first comment line."""
    plan = model.plan
    guard = header_name.upper().replace(".", "_").replace("-", "_") + "_"
    head = model.head
    banner = f"/* Generated by tinynas{': ' + title if title else ''}. C99, no interpreter, no heap. */\n"
    header = (
        banner
        + f"#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n\n"
        + "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
        + f"#define TINYNAS_INPUT_LENGTH {model.input_length}\n"
        + f"#define TINYNAS_INPUT_CHANNELS {model.input_channels}\n"
        + "/* int8 values, time-major: input[t * TINYNAS_INPUT_CHANNELS + channel] */\n"
        + f"#define TINYNAS_INPUT_SIZE {model.input_length * model.input_channels}\n"
        + f"#define TINYNAS_OUTPUT_SIZE {model.classes}\n"
        + "/* Bytes of the static arena the model keeps in .bss (the caller's input and output apart). */\n"
        + f"#define TINYNAS_ARENA_SIZE {plan.arena_bytes}\n"
        + "/* real value = scale * (int8 value - zero point) */\n"
        + f"#define TINYNAS_INPUT_SCALE {_float_literal(model.input.scale)}\n"
        + f"#define TINYNAS_INPUT_ZERO_POINT ({model.input.zero_point})\n"
        + f"#define TINYNAS_OUTPUT_SCALE {_float_literal(model.output.scale)}\n"
        + f"#define TINYNAS_OUTPUT_ZERO_POINT ({model.output.zero_point})\n\n"
        + "/* Classifies one window: reads input[TINYNAS_INPUT_SIZE] in place, writes\n"
        + " * output[TINYNAS_OUTPUT_SIZE] (int8 logits). Not reentrant (one static arena). Returns 0. */\n"
        + f"int {ENTRY_POINT}(const int8_t *input, int8_t *output);\n\n"
        + "#ifdef __cplusplus\n}\n#endif\n\n"
        + f"#endif  /* {guard} */\n")
    parts = [banner, f"#include \"{header_name}\"\n\n",
             f"#define KERNEL_SIZE {model.kernel_size}\n#define PAD_LEFT {pad_left(model.kernel_size)}\n",
             _RUNTIME, _CONV_POOL if len(model.stages) > 1 else "", _CONV_SUM,
             "\n/* Constant tables (flash). */\n"]
    for number, stage in enumerate(model.stages):
        name = f"conv{number}"
        parts += [_array("int8_t", f"{name}_weights", stage.weights),
                  _array("int32_t", f"{name}_bias", stage.bias),
                  _array("int32_t", f"{name}_folded_bias", stage.folded_bias),
                  _array("int32_t", f"{name}_multiplier", stage.multipliers, 8),
                  _array("int8_t", f"{name}_shift", stage.shifts),
                  _conv_initializer(name, stage)]
    parts += [_array("int8_t", "dense_weights", head.weights),
              _array("int32_t", "dense_bias", head.bias),
              _array("int32_t", "dense_multiplier", head.multipliers, 8),
              _array("int8_t", "dense_shift", head.shifts)]
    channels = model.stages[-1].cout
    # The arena as int32 words so the MEAN sums are aligned; int8 maps alias it (char types may).
    parts.append(
        f"\nstatic int32_t arena[TINYNAS_ARENA_SIZE / 4];\n"
        f"#define ARENA ((int8_t *)arena)\n\n"
        f"int {ENTRY_POINT}(const int8_t *input, int8_t *output) {{\n")
    source = "input"
    for number, stage in enumerate(model.stages):
        if stage.pool is not None:
            target = f"ARENA + {plan.maps[number].offset}"
            parts.append(f"  conv_pool(&conv{number}, {source}, {target});\n")
            source = target
        else:
            parts.append(f"  conv_sum(&conv{number}, {source}, arena + {plan.sums_offset // 4});\n")
    correction = head.mean_input_zero_point * head.mean_count
    parts.append(
        f"  {{\n"
        f"    /* MEAN over {head.mean_count} steps: TFLite Micro's QuantizedMeanOrSum with 1/N folded in. */\n"
        f"    const int32_t *sums = arena + {plan.sums_offset // 4};\n"
        f"    int8_t *features = ARENA + {plan.features_offset};\n"
        f"    for (int c = 0; c < {channels}; ++c) {{\n"
        f"      const int32_t centred = sums[c] - ({correction});\n"
        f"      features[c] = (int8_t)clamp(requantize(centred, {head.mean_multiplier}, {head.mean_shift})"
        f" + ({head.mean_output_zero_point}), -128, 127);\n"
        f"    }}\n"
        f"    /* FULLY_CONNECTED: TFLite Micro's FullyConnectedPerChannel. */\n"
        f"    for (int o = 0; o < {model.classes}; ++o) {{\n"
        f"      const int8_t *w = dense_weights + o * {channels};\n"
        f"      int32_t acc = 0;\n"
        f"      for (int c = 0; c < {channels}; ++c) {{\n"
        f"        acc += ((int32_t)w[c] + ({head.weights_offset})) * ((int32_t)features[c] + ({head.input_offset}));\n"
        f"      }}\n"
        f"      acc = requantize(acc + dense_bias[o], dense_multiplier[o], dense_shift[o]) + ({head.output_offset});\n"
        f"      output[o] = (int8_t)clamp(acc, {head.act_min}, {head.act_max});\n"
        f"    }}\n"
        f"  }}\n  return 0;\n}}\n")
    return "".join(parts), header


def compile_tflite(tflite: bytes, header_name: str = "model_compiled.h", title: str = "") -> tuple[str, str]:
    """(source, header) of the C runtime for the int8 A(k, c) model `tflite`."""
    return generate_c(read_integer_model(tflite), header_name, title)
