"""The maintained TFLite interpreter (ai-edge-litert), loaded without log noise."""

from __future__ import annotations

from tinynas.quiet import captured_fd, quiet_environment


def litert_interpreter(tflite: bytes):
    """A LiteRT interpreter (one thread) with tensors allocated for `tflite`."""
    quiet_environment()
    from ai_edge_litert.interpreter import Interpreter

    with captured_fd(2):
        interpreter = Interpreter(model_content=bytes(tflite), num_threads=1)
        interpreter.allocate_tensors()
    return interpreter
