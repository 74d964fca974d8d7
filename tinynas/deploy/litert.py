"""The maintained TFLite interpreter (ai-edge-litert), loaded without log noise."""

from __future__ import annotations

import numpy as np

from tinynas.errors import TinynasError
from tinynas.quiet import captured_fd, quiet_environment
from tinynas.space import SpecError

TFLITE_IDENTIFIER = b"TFL3"
"""FlatBuffer file identifier of a .tflite (bytes 4-8)."""


MAX_MODEL_BYTES = 64 << 20
"""Largest file read as a model: microcontroller models are KiB; a bigger file is the wrong file and
reading it whole could exhaust a Pi's memory."""


class ModelFileError(TinynasError, ValueError):
    """Bytes that are not a TFLite model LiteRT can load (random, truncated, another format)."""


def read_model(path) -> bytes:
    """The bytes of a .tflite file: a regular file of at most MAX_MODEL_BYTES (a folder, a pipe, a device or a file
    too big to be a model is refused before it is read); a missing file raises FileNotFoundError."""
    from firmware_bridge.safe_read import FileTooLarge, read_regular

    try:
        return read_regular(path, MAX_MODEL_BYTES, "microcontroller model (wrong file?)")
    except (FileNotFoundError, PermissionError):
        raise
    except FileTooLarge as exc:
        raise ModelFileError(f"{path}: {exc.strerror}") from None
    except OSError as exc:
        raise ModelFileError(f"{path} is {exc.strerror or exc}") from None


def litert_interpreter(tflite: bytes):
    """A LiteRT interpreter (one thread) with tensors allocated for `tflite`.

    LiteRT verifies the FlatBuffer before using it and raises ValueError or RuntimeError with
    messages about FlatBuffers; a user only needs to know the file is not a usable model.
    """
    tflite = bytes(tflite)
    if len(tflite) < 8 or tflite[4:8] != TFLITE_IDENTIFIER:
        raise ModelFileError("not a TFLite model (no TFL3 identifier; damaged or another format?)")
    quiet_environment()
    from ai_edge_litert.interpreter import Interpreter

    with captured_fd(2):
        try:
            interpreter = Interpreter(model_content=tflite, num_threads=1)
            interpreter.allocate_tensors()
        except (ValueError, RuntimeError) as exc:
            failure = " ".join(str(exc).split())[:120]
            raise ModelFileError(f"not a TFLite model LiteRT can load (damaged or truncated? {failure})") from None
    return interpreter


class Int8Model:
    """A full-integer .tflite ready to classify float windows (n, T, C); reuses one interpreter."""

    def __init__(self, tflite: bytes) -> None:

        self._interpreter = litert_interpreter(tflite)
        inputs, outputs = self._interpreter.get_input_details(), self._interpreter.get_output_details()
        if len(inputs) != 1 or len(outputs) != 1:
            raise SpecError(f"not a tinynas model: {len(inputs)} inputs and {len(outputs)} outputs, expected 1 and 1")
        (self._input,), (self._output,) = inputs, outputs
        shape = tuple(int(d) for d in self._input["shape"])
        if len(shape) != 4 or shape[1] != 1:
            raise SpecError(f"not a tinynas model: input shape {shape}, expected (1, 1, T, C)")
        if self._input["dtype"] != np.int8 or self._output["dtype"] != np.int8:
            raise SpecError("not a full-integer int8 model (tinynas exports int8 input and output)")
        self.window_shape = shape[2:]
        self.classes = int(self._output["shape"][-1])
        self._in_scale, self._in_zero = self._input["quantization"]
        self._out_scale, self._out_zero = self._output["quantization"]

    def quantize(self, windows: np.ndarray) -> np.ndarray:
        """Float windows (n, T, C) as the model's int8 input (what a device's front end hands the C runtime)."""

        windows = np.asarray(windows, dtype=np.float32)
        if windows.ndim != 3 or windows.shape[1:] != self.window_shape:
            raise SpecError(f"windows have shape {windows.shape[1:]} but the model expects {self.window_shape}")
        if not np.isfinite(windows).all():
            raise SpecError("windows contain NaN or inf")
        info = np.iinfo(np.int8)
        return np.clip(np.round(windows / self._in_scale) + self._in_zero, info.min, info.max).astype(np.int8)

    def int8_outputs(self, quantized: np.ndarray) -> np.ndarray:
        """The raw int8 outputs (n, classes) of int8 inputs (n, T, C): what the C runtime on a chip must give."""
        out = np.empty((len(quantized), self.classes), dtype=np.int8)
        for i, window in enumerate(np.asarray(quantized, dtype=np.int8)):
            self._interpreter.set_tensor(self._input["index"], window.reshape(1, 1, *self.window_shape))
            self._interpreter.invoke()
            out[i] = self._interpreter.get_tensor(self._output["index"])[0]
        return out

    def logits(self, windows: np.ndarray) -> np.ndarray:
        """Dequantized logits (n, classes) of float windows (n, T, C), one invocation per window."""
        quantized = self.quantize(windows)
        out = np.empty((len(windows), self.classes), dtype=np.float32)
        for i, window in enumerate(quantized):
            self._interpreter.set_tensor(self._input["index"], window[None, None])
            self._interpreter.invoke()
            raw = self._interpreter.get_tensor(self._output["index"])[0].astype(np.float32)
            out[i] = (raw - self._out_zero) * self._out_scale
        return out
