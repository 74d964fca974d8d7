"""Property test (issue 16): a damaged .tflite (random bytes, truncation, bit flips, spliced junk of a
real exported int8 model) is either still a loadable model or the project's own one-line error, never
another exception and never a crash of the interpreter.

LiteRT is native code: each example runs in a forked child so that a crash would be seen as the
child's signal instead of taking the test process down with it.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings

from tests.support.damage import damaged
from tinynas.deploy.litert import Int8Model
from tinynas.errors import TinynasError

OK, REFUSED, OTHER = 0, 1, 3


def _load_in_child(tflite: bytes) -> tuple[str, str]:
    """('ok' | 'refused' | 'other' | 'crash <signal>', detail) of loading and running `tflite`."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: load, run one window, report, and leave without Python's clean-up
        os.close(read)
        code, detail = OK, ""
        try:
            model = Int8Model(tflite)
            model.logits(np.zeros((1, *model.window_shape), np.float32))
        except TinynasError as exc:
            code, detail = (REFUSED, str(exc)) if str(exc) and "\n" not in str(exc) else (OTHER, repr(exc))
        except BaseException as exc:  # noqa: BLE001 - exactly what the test is looking for
            code, detail = OTHER, f"{type(exc).__name__}: {exc}"
        os.write(write, detail.encode()[:1000])
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        detail = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"crash {os.WTERMSIG(status)}", detail
    return {OK: "ok", REFUSED: "refused"}.get(os.WEXITSTATUS(status), "other"), detail


def test_a_damaged_model_is_a_model_or_one_line(exported_tiny):
    _, tflite, _ = exported_tiny
    assert _load_in_child(tflite)[0] == "ok"
    seen: dict[str, int] = {}

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=damaged(tflite))
    def check(data):
        outcome, detail = _load_in_child(data)
        seen[outcome] = seen.get(outcome, 0) + 1
        assert outcome in ("ok", "refused"), f"{outcome}: {detail}"

    sys.stdout.flush()  # nothing buffered is written twice by a forked child
    check()
    assert seen.get("refused", 0) >= 30  # the damage reached the parser, it was not all harmless
