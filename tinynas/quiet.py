"""Import TensorFlow without its log noise, and capture output written by C code.

TensorFlow, the TFLite converter and TFLite Micro write to the process's file descriptors
from C++, which `contextlib.redirect_stdout` cannot see; `captured_fd` swaps the descriptor
itself so that `--json` output stays clean and printed figures can be parsed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator

_QUIET_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "ABSL_MIN_LOG_LEVEL": "3",
    "GRPC_VERBOSITY": "ERROR",
}


def quiet_environment() -> None:
    """Set the env vars that silence TensorFlow's C++ logging (before it is imported)."""
    for key, value in _QUIET_ENV.items():
        os.environ.setdefault(key, value)


def import_tensorflow():
    """Import and return `tensorflow` with its Python and C++ logging turned down."""
    quiet_environment()
    if "tensorflow" not in sys.modules:
        with captured_fd(2):
            import tensorflow  # noqa: F401
    import tensorflow as tf

    tf.get_logger().setLevel(logging.ERROR)
    logging.getLogger("absl").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="tensorflow")
    warnings.filterwarnings("ignore", message=".*Statistics for quantized inputs.*")
    return tf


class CapturedOutput:
    """Text written to a captured file descriptor, available once the block exits."""

    def __init__(self) -> None:
        self.text = ""


@contextlib.contextmanager
def captured_fd(fd: int) -> Iterator[CapturedOutput]:
    """Redirect file descriptor `fd` (1 or 2) to a temp file for the block; collect the text."""
    stream = {1: sys.stdout, 2: sys.stderr}.get(fd)
    captured = CapturedOutput()
    if stream is not None:
        with contextlib.suppress(Exception):
            stream.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), fd)
        try:
            yield captured
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.flush()
            # C stdio buffers are flushed by libc on fflush; ctypes reaches it without a build step.
            _flush_c_stdio()
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", errors="replace")


def _flush_c_stdio() -> None:
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)
