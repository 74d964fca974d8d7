"""Generate standalone C99 for an exported int8 A(k, c) model: no interpreter, no allocation, no floats.

The model is read by `c_model` (LiteRT's flatbuffer schema, no TensorFlow), which also computes every
requantization parameter exactly as TFLite Micro's Prepare does (`c_quant`); they are stored in flash
with the weights, and the C code repeats the reference kernels' integer arithmetic in the same order, so
its outputs are TFLite Micro's, bit for bit (`tests/deploy/test_c_codegen.py`). Each conv is fused with
its ReLU and the next max-pool (or with the MEAN's sums, for the last one) and the activations live in
one static arena laid out by `tinynas.cost.c_runtime` (maps overlap where the plan proves it safe).
"""

from __future__ import annotations

import numpy as np

from tinynas.c_names import DEFAULT_PREFIX, check_prefix, include_guard
from tinynas.cost.c_runtime import pad_left
from tinynas.deploy import c_quant
from tinynas.deploy.c_model import CodegenError, ConvStage, IntegerModel, read_integer_model
from tinynas.deploy.c_prepare import float_literal, prepare_declaration
from tinynas.folders import COMPILED_H

__all__ = ["DEFAULT_PREFIX", "ENTRY_POINT", "CodegenError", "check_prefix", "compile_tflite", "entry_point",
           "generate_c", "read_integer_model"]

ENTRY_POINT = f"{DEFAULT_PREFIX}_infer"
"""The generated runtime's names start with the prefix (`tinynas.c_names`): `tinynas_infer`, `TINYNAS_INPUT_SIZE`.
Everything else in the source is static, so two models generated with two prefixes link into one firmware."""


def entry_point(prefix: str = DEFAULT_PREFIX) -> str:
    """The function the generated runtime exports: PREFIX_infer(input, output)."""
    return f"{check_prefix(prefix)}_infer"


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


def generate_c(model: IntegerModel, header_name: str = COMPILED_H, title: str = "",
               prefix: str = DEFAULT_PREFIX, anomaly_threshold: int | None = None,
               declare_prepare: bool = False, saturation_step: int = 0) -> tuple[str, str]:
    """(source, header) of the C runtime for `model`; `title` goes in the first comment line, `prefix` starts
    the entry point's and the macros' names (PREFIX_infer, PREFIX_INPUT_SIZE). An anomaly scorer's model
    (`anomaly_threshold`: its threshold in output steps, tinynas.anomaly.card) also gets PREFIX_score, which
    returns the score and the verdict in one call; `saturation_step` steps are added to the score per input sample
    at the edge of the int8 range (tinynas.anomaly.card.SATURATION_STEP; 0: none). `declare_prepare`: the header
    also declares PREFIX_prepare
    (tinynas.deploy.c_prepare, in the model's own _prepare.c)."""
    function, upper = entry_point(prefix), prefix.upper()
    plan = model.plan
    guard = include_guard(prefix, header_name)
    head = model.head
    banner = f"/* Generated by tinynas{': ' + title if title else ''}. C99, no interpreter, no heap. */\n"
    header = (
        banner
        + f"#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n\n"
        + "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
        + f"#define {upper}_INPUT_LENGTH {model.input_length}\n"
        + f"#define {upper}_INPUT_CHANNELS {model.input_channels}\n"
        + f"/* int8 values, time-major: input[t * {upper}_INPUT_CHANNELS + channel] */\n"
        + f"#define {upper}_INPUT_SIZE {model.input_length * model.input_channels}\n"
        + f"#define {upper}_OUTPUT_SIZE {model.classes}\n"
        + "/* Bytes of the static arena the model keeps in .bss (the caller's input and output apart). */\n"
        + f"#define {upper}_ARENA_SIZE {plan.arena_bytes}\n"
        + "/* real value = scale * (int8 value - zero point) */\n"
        + f"#define {upper}_INPUT_SCALE {float_literal(model.input.scale)}\n"
        + f"#define {upper}_INPUT_ZERO_POINT ({model.input.zero_point})\n"
        + f"#define {upper}_OUTPUT_SCALE {float_literal(model.output.scale)}\n"
        + f"#define {upper}_OUTPUT_ZERO_POINT ({model.output.zero_point})\n\n"
        + f"/* Classifies one window: reads input[{upper}_INPUT_SIZE] in place, writes\n"
        + f" * output[{upper}_OUTPUT_SIZE] (int8 logits). Not reentrant (one static arena). Returns 0. */\n"
        + f"int {function}(const int8_t *input, int8_t *output);\n\n"
        + (_score_declaration(prefix, anomaly_threshold, saturation_step) if anomaly_threshold is not None else "")
        + (prepare_declaration(prefix) if declare_prepare else "")
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
        f"\nstatic int32_t arena[{upper}_ARENA_SIZE / 4];\n"
        f"#define ARENA ((int8_t *)arena)\n\n"
        f"int {function}(const int8_t *input, int8_t *output) {{\n")
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
    if anomaly_threshold is not None:
        saturation = (f"  for (int i = 0; i < {upper}_INPUT_SIZE; ++i) {{\n"
                      f"    steps += (input[i] == -128 || input[i] == 127) ? {int(saturation_step)} : 0;\n"
                      f"  }}\n") if saturation_step else ""
        parts.append(
            f"\nint {prefix}_score(const int8_t *input, int16_t *score) {{\n"
            f"  int8_t output[{upper}_OUTPUT_SIZE];\n"
            f"  {function}(input, output);\n"
            f"  int32_t steps = (int32_t)output[1] - (int32_t)output[0];\n"
            + saturation +
            f"  *score = (int16_t)(steps > INT16_MAX ? INT16_MAX : steps);\n"
            f"  return steps > {upper}_ANOMALY_THRESHOLD;\n}}\n")
    return "".join(parts), header


def _score_declaration(prefix: str, threshold: int, saturation_step: int = 0) -> str:
    upper = prefix.upper()
    saturation = (f" * Each input sample at the edge of the int8 range (-128 or 127) adds {upper}_SATURATION_STEP:\n"
                  f" * a window louder than the windows the input range was set on scores above every one that is\n"
                  f" * not.\n"
                  if saturation_step else "")
    return (f"/* Anomaly scorer: score = output[1] - output[0] in output steps (real score = {upper}_OUTPUT_SCALE *\n"
            f" * score); a window is anomalous when score > {upper}_ANOMALY_THRESHOLD, set on held-out normal windows\n"
            f" * for the false-alarm rate in card.json (anomaly.false_alarm_rate).\n{saturation} */\n"
            f"#define {upper}_ANOMALY_THRESHOLD ({int(threshold)})\n"
            + (f"#define {upper}_SATURATION_STEP ({int(saturation_step)})\n" if saturation_step else "")
            + f"/* Scores one window (as {prefix}_infer) and writes *score (at most INT16_MAX; the verdict is taken\n"
            f" * before that bound); returns 1 if it is anomalous, else 0. */\n"
            f"int {prefix}_score(const int8_t *input, int16_t *score);\n\n")


def compile_tflite(tflite: bytes, header_name: str = COMPILED_H, title: str = "",
                   prefix: str = DEFAULT_PREFIX) -> tuple[str, str]:
    """(source, header) of the C runtime for the int8 A(k, c) model `tflite` (names starting with `prefix`)."""
    return generate_c(read_integer_model(tflite), header_name, title, prefix)
