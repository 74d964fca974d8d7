"""Check /work/briefs/tflm_int8_spec.md (TFLM's int8 arithmetic) against the tflite_micro wheel.

A plain-Python emulation of the four reference kernels exactly as the spec writes them, run op by op on
converted models: each op gets the wheel's own input tensor (InterpreterConfig.kPreserveAllTensors keeps
every intermediate) and its output is compared value by value. Variants that change one reading of the
spec show which details matter:

  single      TFLITE_SINGLE_ROUNDING's MultiplyByQuantizedMultiplier instead of the double rounding
  pad_ceil    the extra SAME padding on the left instead of the right (even kernels)
  mean_float  the old TFLite float requantization for MEAN
  mean_round  rounding instead of truncating (M << s) / N in MEAN

Usage: python benchmarks/tflm_arm/spec_check.py N_INPUTS VARIANTS MODEL.tflite...
       (VARIANTS: comma-separated, '-' for the spec alone, e.g. '-,single,pad_ceil')
"""

from __future__ import annotations

import math
import sys

import numpy as np

INT32_MIN = -(2**31)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """tflite::QuantizeMultiplier: frexp, round half away from zero to Q31, q == 2^31 folded."""
    if real == 0.0:
        return 0, 0
    fraction, shift = math.frexp(real)
    scaled = fraction * 2**31
    q = int(math.floor(abs(scaled) + 0.5)) * (1 if scaled >= 0 else -1)
    if q == 2**31:
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q, shift


def saturating_rounding_doubling_high_mul(a: int, b: int) -> int:
    """gemmlowp's SRDHM: (a*b + 2^30) >> 31 (ties up), INT32_MIN*INT32_MIN saturates."""
    if a == b == INT32_MIN:
        return 2**31 - 1
    return (a * b + (1 << 30)) >> 31


def rounding_divide_by_pot(x: int, exponent: int) -> int:
    """gemmlowp's RoundingDivideByPOT: x / 2^exponent, ties away from zero."""
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if (x & mask) > threshold else 0)


def wrap32(value: int) -> int:
    return ((value + 2**31) % 2**32) - 2**31


def multiply_by_quantized_multiplier(x: int, q: int, shift: int, single: bool = False) -> int:
    if single:
        total = 31 - shift
        return (x * q + (1 << (total - 1))) >> total
    left = max(shift, 0)
    right = max(-shift, 0)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(wrap32(x * (1 << left)), q), right)


def round_half_away_f32(value) -> float:
    value = np.float32(value)
    return float(np.sign(value) * np.floor(np.abs(value) + np.float32(0.5)))


def activation_range(activation: int, scale: float, zero_point: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized for NONE (0) and RELU (1), int8 output."""
    if activation == 1:
        return max(-128, zero_point + int(round_half_away_f32(np.float32(0.0) / np.float32(scale)))), 127
    if activation != 0:
        raise ValueError(f"activation {activation} not handled")
    return -128, 127


class Emulator:
    """The int8 graph of one .tflite, evaluated with the spec's arithmetic."""

    def __init__(self, tflite: bytes):
        # A benchmark script, outside the package boundary: the flatbuffer schema comes with TensorFlow.
        from tensorflow.lite.python import schema_py_generated as schema  # noqa: TID251

        self.schema = schema
        self.model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(tflite, 0))
        self.graph = self.model.subgraphs[0]
        self.op_names = {v: k for k, v in schema.BuiltinOperator.__dict__.items() if not k.startswith("_")}

    def constant(self, index: int) -> np.ndarray:
        tensor = self.graph.tensors[index]
        dtype = {self.schema.TensorType.INT8: np.int8, self.schema.TensorType.INT32: np.int32}[tensor.type]
        return np.frombuffer(bytes(self.model.buffers[tensor.buffer].data), dtype=dtype).reshape(tensor.shape)

    def quantization(self, index: int) -> tuple[list[float], list[int]]:
        q = self.graph.tensors[index].quantization
        return [float(np.float32(s)) for s in q.scale], [int(z) for z in q.zeroPoint]

    def check(self, reference, variant: tuple[str, ...], stats: dict) -> None:
        """Run every op on the wheel's input (`reference(tensor_index)`), count differing outputs."""
        for op in self.graph.operators:
            code = self.model.operatorCodes[op.opcodeIndex]
            name = self.op_names[max(code.builtinCode, code.deprecatedBuiltinCode)]
            source = reference(op.inputs[0]).astype(np.int64)
            out = self.evaluate(name, op, source, variant)
            wheel = reference(op.outputs[0]).reshape(out.shape)
            count = stats.setdefault(name, [0, 0])
            count[0] += int((wheel != out).sum())
            count[1] += out.size

    def evaluate(self, name: str, op, x: np.ndarray, variant: tuple[str, ...]) -> np.ndarray:
        single = "single" in variant
        options = op.builtinOptions
        (in_scale,), (in_zp,) = self.quantization(op.inputs[0])
        (out_scale,), (out_zp,) = self.quantization(op.outputs[0])
        if name == "CONV_2D":
            weights, bias = self.constant(op.inputs[1]), self.constant(op.inputs[2])
            filter_scales, _ = self.quantization(op.inputs[1])
            channels_out, _, kernel, _ = weights.shape
            _, height, width, _ = x.shape
            assert height == 1 and options.strideW == 1 and options.padding == self.schema.Padding.SAME
            multipliers = [quantize_multiplier(in_scale * filter_scales[o if len(filter_scales) > 1 else 0]
                                               / out_scale) for o in range(channels_out)]
            low, high = activation_range(options.fusedActivationFunction, out_scale, out_zp)
            pad = kernel // 2 if "pad_ceil" in variant else (kernel - 1) // 2
            out = np.zeros((1, 1, width, channels_out), np.int64)
            for t in range(width):
                for o in range(channels_out):
                    acc = 0
                    for k in range(kernel):
                        source = t - pad + k
                        if 0 <= source < width:
                            acc += int(np.dot(weights[o, 0, k].astype(np.int64), x[0, 0, source] - in_zp))
                    acc = multiply_by_quantized_multiplier(acc + int(bias[o]), *multipliers[o], single) + out_zp
                    out[0, 0, t, o] = min(max(acc, low), high)
            return out
        if name == "MAX_POOL_2D":
            half = x.shape[2] // 2
            return np.maximum(x[:, :, 0:2 * half:2], x[:, :, 1:2 * half:2])
        if name == "MEAN":
            assert list(self.constant(op.inputs[1])) == [1, 2] and not options.keepDims
            _, height, width, channels = x.shape
            count = height * width
            multiplier, shift = quantize_multiplier(in_scale / out_scale)
            s = min(count.bit_length() - 1, 32, 31 + shift)
            scaled = (multiplier << s) // count if "mean_round" not in variant \
                else ((multiplier << s) + count // 2) // count
            sums = x.reshape(-1, channels).sum(axis=0)
            out = np.zeros((1, channels), np.int64)
            for c in range(channels):
                value = multiply_by_quantized_multiplier(wrap32(int(sums[c]) - in_zp * count), scaled,
                                                         shift - s, single) + out_zp
                if "mean_float" in variant:
                    ratio = np.float32(in_scale) / np.float32(out_scale)
                    value = int(round_half_away_f32(np.float32(sums[c]) / np.float32(count) * ratio
                                                    - np.float32(in_zp) * ratio)) + out_zp
                out[0, c] = min(max(value, -128), 127)
            return out
        if name == "FULLY_CONNECTED":
            weights, bias = self.constant(op.inputs[1]), self.constant(op.inputs[2])
            filter_scales, filter_zps = self.quantization(op.inputs[1])
            classes = weights.shape[0]
            low, high = activation_range(options.fusedActivationFunction, out_scale, out_zp)
            if len(filter_scales) > 1:
                multipliers = [quantize_multiplier(in_scale * filter_scales[o] / out_scale) for o in range(classes)]
                filter_offset = 0  # ignored by FullyConnectedPerChannel
            else:  # GetQuantizedConvolutionMultipler: the float32 product, then double
                product = float(np.float32(in_scale) * np.float32(filter_scales[0]))
                multipliers = [quantize_multiplier(product / out_scale)] * classes
                filter_offset = filter_zps[0]
            flat = x.reshape(-1)
            out = np.zeros((1, classes), np.int64)
            for o in range(classes):
                acc = int(np.dot(weights[o].astype(np.int64) - filter_offset, flat - in_zp)) + int(bias[o])
                acc = multiply_by_quantized_multiplier(acc, *multipliers[o], single) + out_zp
                out[0, o] = min(max(acc, low), high)
            return out
        raise ValueError(f"op {name} not handled")


def main(count: int, variants: list[str], paths: list[str]) -> None:
    from tflite_micro.python.tflite_micro import runtime

    for path in paths:
        tflite = open(path, "rb").read()
        emulator = Emulator(tflite)
        interpreter = runtime.Interpreter.from_bytes(
            tflite, intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
        shape = emulator.graph.tensors[emulator.graph.inputs[0]].shape
        (in_scale,), (in_zp,) = emulator.quantization(emulator.graph.inputs[0])
        rng = np.random.default_rng(1)
        stats: dict[str, dict] = {v: {} for v in variants}
        for index in range(count):
            if index % 2:
                x = rng.integers(-128, 128, size=shape).astype(np.int8)
            else:
                x = np.clip(np.round(rng.normal(size=shape) / in_scale) + in_zp, -128, 127).astype(np.int8)
            interpreter.set_input(x, 0)
            interpreter.invoke()

            def reference(i, interpreter=interpreter):
                return interpreter.GetTensor(int(i), 0)["tensor_data"]

            for v in variants:
                emulator.check(reference, tuple(v.split("+")) if v != "-" else (), stats[v])
        for v in variants:
            summary = "; ".join(f"{op} {bad}/{total} differ" for op, (bad, total) in stats[v].items())
            print(f"{path} [{'spec' if v == '-' else v}]: {summary}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:])
