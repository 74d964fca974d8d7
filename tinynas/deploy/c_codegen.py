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

from tinynas.c_names import DEFAULT_PREFIX, c_comment, check_prefix, include_guard
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
/* The kernels: integer arithmetic in TFLite Micro's order of roundings (its outputs, bit for bit), arranged for
 * speed. A conv row is computed for a block of four output channels at a time, so every input byte loaded serves
 * the whole block: on cores with the DSP extension (Cortex-M4/M7/M33: __ARM_FEATURE_DSP) four int8 pairs are
 * multiplied and added in two SMLAD instructions, the bytes unpacked with SXTB16 (CMSIS-NN's scheme); on the
 * Cortex-M0/M0+ (Armv6-M) a hand-scheduled loop keeps the four sums in registers (15 instructions per input byte);
 * elsewhere (the host) plain C. The sums are exact either way: int32, which cannot overflow for these kernels,
 * so the order of the additions does not change them. */
#if defined(__GNUC__)
#define TN_INLINE static inline __attribute__((always_inline))
#define TN_OUTLINE static __attribute__((noinline))
#else
#define TN_INLINE static inline
#define TN_OUTLINE static
#endif

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
#define TN_SIMD 1
#include <arm_acle.h>
#include <string.h>
/* A word from any address (the M4 loads unaligned words in one instruction). */
TN_INLINE int32_t load32(const int8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }
/* Bytes 1 and 3 of v, sign-extended to two int16 halves (SXTB16 with its rotation: one instruction). */
TN_INLINE int32_t sxtb16_ror8(int32_t v) { int32_t r; __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v)); return r; }
#else
#define TN_SIMD 0
#endif

/* gemmlowp's SaturatingRoundingDoublingHighMul for a multiplier b in [0, 2^31): (ab + nudge) / 2^31 truncated
 * equals the arithmetic shift (ab + 2^30) >> 31 for every ab, which avoids a 64-bit division on cores without
 * one. The one saturating case (a = b = INT32_MIN) cannot occur with b >= 0. */
#if defined(__ARM_ARCH_6M__) || defined(TN_HIGH_MUL_32)
/* Armv6-M has no 32 x 32 -> 64 multiply: the 64-bit product of a and b from four 16 x 16 ones, in 32-bit words
 * (the library's 64 x 64 multiply took twice the instructions). TN_HIGH_MUL_32 builds it on the host too (a test
 * holds it equal to the 64-bit form). One copy, called: inlined in the three output loops it cost 300 B of flash. */
TN_OUTLINE int32_t high_mul(int32_t a, int32_t b) {
  const uint32_t al = (uint32_t)a & 0xFFFFu, bl = (uint32_t)b & 0xFFFFu, bh = (uint32_t)b >> 16;
  const int32_t ah = a >> 16;
  const int32_t cross_high = ah * (int32_t)bl;  /* |.| < 2^31 */
  const uint32_t cross_low = al * bh;           /* < 2^31 */
  uint32_t lo = al * bl, t;
  int32_t hi = ah * (int32_t)bh;
  t = (uint32_t)cross_high << 16;
  lo += t;
  hi += (cross_high >> 16) + (lo < t);
  t = cross_low << 16;
  lo += t;
  hi += (int32_t)(cross_low >> 16) + (lo < t);
  t = 1u << 30;
  lo += t;
  hi += (lo < t);
  return (int32_t)(((uint32_t)hi << 1) | (lo >> 31));
}
#else
TN_INLINE int32_t high_mul(int32_t a, int32_t b) {
  return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}
#endif

/* MultiplyByQuantizedMultiplier as TFLite Micro's default build computes it: two roundings. */
TN_INLINE int32_t requantize(int32_t x, int32_t multiplier, int shift) {
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  const int32_t high = high_mul(x * (1 << left), multiplier);
  /* gemmlowp's RoundingDivideByPOT: ties away from zero. */
  const int32_t mask = (int32_t)((1u << right) - 1u);
  const int32_t remainder = high & mask;
  const int32_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return (high >> right) + (remainder > threshold ? 1 : 0);
}

TN_INLINE int32_t clamp(int32_t x, int32_t low, int32_t high) {
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

/* Requantized, offset and clamped to the conv's activation range: the conv's int8 output for the sum `acc`. */
TN_INLINE int32_t conv_output(const conv_stage *s, int o, int32_t acc) {
  return clamp(requantize(acc, s->multiplier[o], s->shift[o]) + s->output_offset, s->act_min, s->act_max);
}

/* Outputs o .. o + count - 1 of the last conv, added to MEAN's sums. */
TN_OUTLINE void emit_sum(const conv_stage *s, int o, int count, const int32_t *acc, int32_t *sums) {
  for (int i = 0; i < count; ++i) sums[o + i] += conv_output(s, o + i, acc[i]);
}

/* sum of w[i] * x[i] for i < n */
TN_OUTLINE int32_t dot(const int8_t *x, const int8_t *w, int n) {
  int32_t acc = 0;
  int i = 0;
#if TN_SIMD
  for (; i + 4 <= n; i += 4) {
    const int32_t xv = load32(x + i), wv = load32(w + i);
    acc = __smlad(__sxtb16(wv), __sxtb16(xv), acc);
    acc = __smlad(sxtb16_ror8(wv), sxtb16_ror8(xv), acc);
  }
#endif
  for (; i < n; ++i) acc += (int32_t)x[i] * (int32_t)w[i];
  return acc;
}

#if defined(__ARM_ARCH_6M__) && defined(__GNUC__) && !TN_SIMD
/* acc[b] = init[b] + sum of x[i] * w[b * stride + i] for b < 4, i < n (n > 0), on Armv6-M: x and the four weight
 * rows are walked by one negative index (ldrsb has register offsets only), the sums kept in r8-r11: 15
 * instructions per input byte. Called with the ends of x and of the first weight row. A local symbol: two models
 * (two prefixes) link into one firmware. */
void tn_dot4_v6m(const int8_t *x_end, const int8_t *w_end, int n, int stride, const int32_t *init, int32_t *acc);
__asm__(
  "  .pushsection .text.tn_dot4_v6m,\"ax\",%progbits\n"
  "  .syntax unified\n  .thumb\n  .p2align 1\n  .thumb_func\n  .type tn_dot4_v6m, %function\n"
  "tn_dot4_v6m:\n"
  "  push {r4, r5, r6, r7, lr}\n  mov r4, r8\n  mov r5, r9\n  mov r6, r10\n  mov r7, r11\n  push {r4, r5, r6, r7}\n"
  "  ldr r4, [sp, #36]\n"
  "  ldr r5, [r4, #0]\n  mov r8, r5\n  ldr r5, [r4, #4]\n  mov r9, r5\n"
  "  ldr r5, [r4, #8]\n  mov r10, r5\n  ldr r5, [r4, #12]\n  mov r11, r5\n"
  "  ldr r4, [sp, #40]\n  mov ip, r4\n"
  "  adds r4, r1, r3\n  adds r5, r4, r3\n  adds r6, r5, r3\n  rsbs r7, r2, #0\n"
  "1:\n"
  "  ldrsb r3, [r0, r7]\n"
  "  ldrsb r2, [r1, r7]\n  muls r2, r3, r2\n  add r8, r2\n"
  "  ldrsb r2, [r4, r7]\n  muls r2, r3, r2\n  add r9, r2\n"
  "  ldrsb r2, [r5, r7]\n  muls r2, r3, r2\n  add r10, r2\n"
  "  ldrsb r2, [r6, r7]\n  muls r2, r3, r2\n  add r11, r2\n"
  "  adds r7, r7, #1\n  bne 1b\n"
  "  mov r3, ip\n  mov r4, r8\n  str r4, [r3, #0]\n  mov r4, r9\n  str r4, [r3, #4]\n"
  "  mov r4, r10\n  str r4, [r3, #8]\n  mov r4, r11\n  str r4, [r3, #12]\n"
  "  pop {r4, r5, r6, r7}\n  mov r8, r4\n  mov r9, r5\n  mov r10, r6\n  mov r11, r7\n  pop {r4, r5, r6, r7, pc}\n"
  "  .size tn_dot4_v6m, .-tn_dot4_v6m\n"
  "  .popsection\n");
#define dot4(x, w, n, stride, init, acc) tn_dot4_v6m((x) + (n), (w) + (n), (n), (stride), (init), (acc))
#elif TN_SIMD
/* acc[b] = init[b] + sum of x[i] * w[b * stride + i] for b < 4, i < n, with the DSP extension: each input word unpacked
 * once (SXTB16, with and without its rotation) serves four weight words, 16 MACs in 8 SMLADs and 25 instructions;
 * the n % 4 bytes left over by MLA. Fourteen registers hold the loop, so it is written out rather than left to
 * the register allocator (gcc -Os spilled the weight pointers to the stack). */
void tn_dot4_dsp(const int8_t *x, const int8_t *w, int n, int stride, const int32_t *init, int32_t *acc);
__asm__(
  "  .pushsection .text.tn_dot4_dsp,\"ax\",%progbits\n"
  "  .syntax unified\n  .thumb\n  .p2align 2\n  .thumb_func\n  .type tn_dot4_dsp, %function\n"
  "tn_dot4_dsp:\n"
  "  push {r4, r5, r6, r7, r8, r9, r10, r11, lr}\n"
  "  ldr r12, [sp, #36]\n  ldm r12, {r4, r5, r6, r7}\n"
  "  add r8, r1, r3\n  add r9, r8, r3\n  add r10, r9, r3\n"
  "  push {r2}\n"
  "  bic r12, r2, #3\n  add r12, r0, r12\n"
  "  cmp r0, r12\n  beq 2f\n"
  "1:\n"
  "  ldr r3, [r0], #4\n  sxtb16 r11, r3, ror #8\n  sxtb16 r3, r3\n"
  "  ldr lr, [r1], #4\n  sxtb16 r2, lr\n  smlad r4, r2, r3, r4\n  sxtb16 r2, lr, ror #8\n  smlad r4, r2, r11, r4\n"
  "  ldr lr, [r8], #4\n  sxtb16 r2, lr\n  smlad r5, r2, r3, r5\n  sxtb16 r2, lr, ror #8\n  smlad r5, r2, r11, r5\n"
  "  ldr lr, [r9], #4\n  sxtb16 r2, lr\n  smlad r6, r2, r3, r6\n  sxtb16 r2, lr, ror #8\n  smlad r6, r2, r11, r6\n"
  "  ldr lr, [r10], #4\n  sxtb16 r2, lr\n  smlad r7, r2, r3, r7\n  sxtb16 r2, lr, ror #8\n  smlad r7, r2, r11, r7\n"
  "  cmp r0, r12\n  bne 1b\n"
  "2:\n"
  "  pop {r2}\n"
  "  ands r2, r2, #3\n  beq 4f\n"
  "3:\n"
  "  ldrsb r11, [r0], #1\n"
  "  ldrsb lr, [r1], #1\n  mla r4, r11, lr, r4\n"
  "  ldrsb lr, [r8], #1\n  mla r5, r11, lr, r5\n"
  "  ldrsb lr, [r9], #1\n  mla r6, r11, lr, r6\n"
  "  ldrsb lr, [r10], #1\n  mla r7, r11, lr, r7\n"
  "  subs r2, r2, #1\n  bne 3b\n"
  "4:\n"
  "  ldr r12, [sp, #40]\n  stm r12, {r4, r5, r6, r7}\n"
  "  pop {r4, r5, r6, r7, r8, r9, r10, r11, pc}\n"
  "  .size tn_dot4_dsp, .-tn_dot4_dsp\n"
  "  .popsection\n");
#define dot4(x, w, n, stride, init, acc) tn_dot4_dsp((x), (w), (n), (stride), (init), (acc))
#else
/* acc[b] = init[b] + sum of x[i] * w[b * stride + i] for b < 4, i < n */
static void dot4(const int8_t *x, const int8_t *w, int n, int stride, const int32_t *init, int32_t *acc) {
  const int8_t *w1 = w + stride, *w2 = w1 + stride, *w3 = w2 + stride;
  int32_t a0 = init[0], a1 = init[1], a2 = init[2], a3 = init[3];
  for (int i = 0; i < n; ++i) {
    const int32_t v = x[i];
    a0 += v * w[i];
    a1 += v * w1[i];
    a2 += v * w2[i];
    a3 += v * w3[i];
  }
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}
#endif

/* The int32 sums of channels o .. o + count - 1 (count <= 4) at conv row x, bias included: TFLite Micro's
 * ConvPerChannel sums w * (x + input_offset) over the taps inside the map (padded taps are skipped). Those taps
 * are one contiguous run of rows and of weights, so the sum is a dot product plus input_offset * (the sum of those
 * weights), folded into the bias: at an edge row the padded taps' weights take their share back out. The same
 * int32 whatever the order of the additions. */
TN_OUTLINE void conv_sums(const conv_stage *s, const int8_t *in, int x, int o, int count, int32_t *acc) {
  const int cin = s->cin, n = KERNEL_SIZE * cin, first = x - PAD_LEFT;
  /* The taps inside the map: k0 <= k < k1 (all of them but at an edge row). */
  const int k0 = first < 0 ? -first : 0;
  const int k1 = first + KERNEL_SIZE > s->rows ? s->rows - first : KERNEL_SIZE;
  const int start = k0 * cin, length = (k1 - k0) * cin;
  const int8_t *window = in + (first + k0) * cin, *w = s->weights + o * n;
  /* The bias is the dot's starting value: copied apart, gcc -Os made the copy a call to memmove (a tenth of a
   * stem-only model's time). */
  const int32_t *bias = s->folded_bias + o;
  if (count == 4) {
    dot4(window, w + start, length, n, bias, acc);
  } else {
    for (int b = 0; b < count; ++b) acc[b] = bias[b] + dot(window, w + start + b * n, length);
  }
  if (length < n) {  /* an edge row */
    for (int b = 0; b < count; ++b, w += n) {
      int32_t outside = 0;
      for (int i = 0; i < start; ++i) outside += w[i];
      for (int i = start + length; i < n; ++i) outside += w[i];
      acc[b] -= outside * s->input_offset;
    }
  }
}
"""

_CONV_POOL = r"""
/* Pooled outputs o .. o + count - 1 from the sums of their two conv rows (a, b). Requantization is monotonic in
 * the sum, so the max-pool of two outputs is the output of the larger sum: one requantization instead of two.
 * Not with a left shift (shift > 0), whose product may wrap around in int32 as TFLite Micro's does: both rows are
 * requantized there. */
TN_OUTLINE void emit_pool(const conv_stage *s, int o, int count, const int32_t *a, const int32_t *b, int8_t *out) {
  const int32_t low = s->pool_min, high = s->pool_max;
  for (int i = 0; i < count; ++i) {
    int32_t v;
    if (s->shift[o + i] <= 0) {
      v = conv_output(s, o + i, a[i] > b[i] ? a[i] : b[i]);
    } else {
      const int32_t first = conv_output(s, o + i, a[i]), second = conv_output(s, o + i, b[i]);
      v = first > second ? first : second;
    }
    out[o + i] = (int8_t)clamp(v, low, high);
  }
}

/* conv + ReLU + 1x2 max-pool: only the pooled map is stored. Pooled row j is written once conv rows 2j and 2j + 1
 * are summed, while input rows from 2j - PAD_LEFT on are still read; the arena plan puts the output low enough
 * never to touch them. */
static void conv_pool(const conv_stage *s, const int8_t *in, int8_t *out) {
  int32_t a[4], b[4];
  for (int j = 0; j < s->rows / 2; ++j, out += s->cout) {
    for (int o = 0; o < s->cout; o += 4) {
      const int count = s->cout - o < 4 ? s->cout - o : 4;
      conv_sums(s, in, 2 * j, o, count, a);
      conv_sums(s, in, 2 * j + 1, o, count, b);
      emit_pool(s, o, count, a, b, out);
    }
  }
}
"""

_CONV_SUM = r"""
/* The last conv + ReLU straight into MEAN's int32 sums: its map is never stored. */
static void conv_sum(const conv_stage *s, const int8_t *in, int32_t *sums) {
  int32_t acc[4];
  for (int o = 0; o < s->cout; ++o) sums[o] = 0;
  for (int x = 0; x < s->rows; ++x) {
    for (int o = 0; o < s->cout; o += 4) {
      const int count = s->cout - o < 4 ? s->cout - o : 4;
      conv_sums(s, in, x, o, count, acc);
      emit_sum(s, o, count, acc, sums);
    }
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
    (`anomaly_threshold`: its threshold in output steps, tinynas.anomaly.section) also gets PREFIX_score, which
    returns the score and the verdict in one call; `saturation_step` steps are added to the score per input sample
    at the edge of the int8 range (tinynas.anomaly.scoring.SATURATION_STEP; 0: none). `declare_prepare`: the header
    also declares PREFIX_prepare
    (tinynas.deploy.c_prepare, in the model's own _prepare.c)."""
    function, upper = entry_point(prefix), prefix.upper()
    plan = model.plan
    guard = include_guard(prefix, header_name)
    head = model.head
    banner = f"/* Generated by tinynas{': ' + c_comment(title) if title else ''}. C99, no interpreter, no heap. */\n"
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
