"""TFLite Micro's integer requantization, computed on the host exactly as its kernels' Prepare does.

The generated C runtime (`c_codegen`) stores the results as constant tables, so the microcontroller
never sees a float scale. Each function names the TFLite Micro function it reproduces (reference kernels,
default build: double rounding, `TFLITE_SINGLE_ROUNDING` undefined). Python floats are IEEE doubles, so
the double arithmetic below is the C++ arithmetic.
"""

from __future__ import annotations

import math

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def round_half_away(value: float) -> int:
    """std::round: halves go away from zero (Python's round() goes to even)."""
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier: `real` = q * 2^(shift - 31), q a Q31 int32 in [2^30, 2^31); shift > 0 is left."""
    if real == 0.0:
        return 0, 0
    fraction, shift = math.frexp(real)
    q = round_half_away(fraction * (1 << 31))  # exact: fraction has 53 bits, the product only moves them
    if q > (1 << 31):
        raise ValueError(f"multiplier {real!r} does not round to Q31")
    if q == 1 << 31:
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q, shift


def per_channel_multipliers(input_scale: float, filter_scales, output_scale: float) -> list[tuple[int, int]]:
    """PopulateConvolutionQuantizationParams (also FULLY_CONNECTED per channel): in * filter / out, in double."""
    return [quantize_multiplier(float(input_scale) * float(scale) / float(output_scale))
            for scale in filter_scales]


def per_tensor_fc_multiplier(input_scale, filter_scale, output_scale) -> tuple[int, int]:
    """GetQuantizedConvolutionMultipler: the scale product is taken in float32 first, then divided in double."""
    import numpy as np

    product = float(np.float32(input_scale) * np.float32(filter_scale))
    return quantize_multiplier(product / float(output_scale))


def mean_multiplier(input_scale: float, output_scale: float, count: int) -> tuple[int, int]:
    """QuantizedMeanOrSum's multiplier with 1/count folded in (reduce.h): (M << s) // count, shift S - s."""
    multiplier, shift = quantize_multiplier(float(input_scale) / float(output_scale))
    s = min(count.bit_length() - 1, 32, 31 + shift)  # >= 0: quantize_multiplier keeps shift >= -31
    return (multiplier << s) // count, shift - s


def activation_range(fused: str, output_scale: float, output_zero_point: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized for int8 outputs: NONE or RELU (the only ones in A(k, c) graphs)."""
    import numpy as np

    if fused == "NONE":
        return INT8_MIN, INT8_MAX
    if fused == "RELU":
        zero = output_zero_point + round_half_away(float(np.float32(0.0) / np.float32(output_scale)))
        return max(INT8_MIN, zero), INT8_MAX
    raise ValueError(f"fused activation {fused} is not supported by the C runtime")


# Bit-exact Python models of the two fixed-point steps, for tests and for checking tables.

def saturating_rounding_doubling_high_mul(a: int, b: int) -> int:
    """gemmlowp's SaturatingRoundingDoublingHighMul: round(a*b / 2^31), ties towards +inf, one saturation."""
    if a == b == INT32_MIN:
        return INT32_MAX
    product = a * b
    nudge = (1 << 30) if product >= 0 else 1 - (1 << 30)
    total = product + nudge
    quotient = abs(total) >> 31  # C++ division truncates towards zero
    return quotient if total >= 0 else -quotient


def rounding_divide_by_pot(x: int, exponent: int) -> int:
    """gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded, ties away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier (double rounding), as the C runtime computes it."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x * (1 << left), multiplier), right)
