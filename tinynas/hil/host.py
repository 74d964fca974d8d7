"""The same generated C runtime built for this computer, as the reference a board's answers are compared with.

The C runtime is integer-only C99, so a chip that runs it right gives the host build's outputs bit for bit; a
difference points at the board (a compiler, an alignment, a stack) rather than at rounding.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tinynas.errors import TinynasError
from tinynas.folders import MODEL_C

COMPILE_TIMEOUT_S = 300.0
_MAIN = """#include <stdio.h>
#include <stdint.h>
#include "{header}"
int main(void) {{
    static int8_t input[{upper}_INPUT_SIZE], output[{upper}_OUTPUT_SIZE];
    while (fread(input, 1, sizeof input, stdin) == sizeof input) {{
        if ({prefix}_infer(input, output) != 0) return 3;
        if (fwrite(output, 1, sizeof output, stdout) != sizeof output) return 4;
    }}
    return 0;
}}
"""


class HostBuildError(TinynasError, RuntimeError):
    """The C runtime did not build or run on this computer."""


def host_compiler() -> str | None:
    return next((name for name in ("cc", "gcc", "clang") if shutil.which(name)), None)


def host_outputs(source: bytes, header: bytes, header_name: str, prefix: str, inputs: np.ndarray) -> np.ndarray:
    """The int8 outputs (n, classes) of the C runtime `source` built here, for int8 `inputs` (n, input size)."""
    compiler = host_compiler()
    if compiler is None:
        raise HostBuildError("no C compiler on this computer (cc, gcc or clang) to build the reference")
    with tempfile.TemporaryDirectory(prefix="tinynas-host-") as folder:
        work = Path(folder)
        (work / MODEL_C).write_bytes(source)
        (work / header_name).write_bytes(header)
        (work / "main.c").write_text(_MAIN.format(header=header_name, upper=prefix.upper(), prefix=prefix))
        built = subprocess.run([compiler, "-std=c99", "-O2", "main.c", MODEL_C, "-lm", "-o", "model"], cwd=work,
                               capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if built.returncode != 0:
            raise HostBuildError(f"the C runtime did not build here: {(built.stderr or built.stdout).strip()[:160]}")
        ran = subprocess.run([str(work / "model")], input=np.ascontiguousarray(inputs, np.int8).tobytes(),
                             capture_output=True, timeout=COMPILE_TIMEOUT_S)
        if ran.returncode != 0:
            raise HostBuildError(f"the C runtime built here stopped with status {ran.returncode}")
    outputs = np.frombuffer(ran.stdout, dtype=np.int8)
    return outputs.reshape(len(inputs), -1)
