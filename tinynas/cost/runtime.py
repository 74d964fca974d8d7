"""Which runtime runs a model on the chip, and which rule counts its RAM and flash (one owner of both names).

A runtime is what executes the int8 network on the microcontroller: TFLite Micro's interpreter ("tflm") or
tinynas's generated C ("c", `tinynas.cost.c_runtime`). `--runtime auto`, the default of the CLI, the API and
the service, picks the C runtime wherever the target can run it: it needs a C99 compiler and nothing else,
so every built-in target can, and it holds bigger networks in the same chip (no interpreter, no per-tensor
structures). A target file can say it cannot (`runtimes = ["tflm"]`), and then auto picks TFLite Micro.

An accounting is the rule that turns a model into bytes for the budget check (issue 37):

* "chip" (the default): what the chip must hold. For TFLite Micro: the 32-bit arena + the interpreter's
  static RAM + its peak stack, and the .tflite + the interpreter's code (`tinynas.cost.tflm_footprint`,
  measured on Arm builds). For the C runtime: its arena, the caller's buffers and its stack; its tables and
  code (it has always been counted whole).
* "arena": TFLite Micro's 32-bit arena and the .tflite alone: tinynas's rule before the whole footprint was
  counted. Kept so that journals and cards written under it still resume and re-check as they were.
* "method": the method's own tool (ST's stm32tflm, as its authors searched with it): the 64-bit host arena
  rounded up to 512 B, and the .tflite. Only to compare with the method's published figures under its rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinynas.cost.targets import RUNTIMES, Target
from tinynas.errors import UsageError
from tinynas.modes import Accounting, Runtime

RUNTIME_CHOICES = ("auto", "c", "tflm")
"""What a user may ask for (`--runtime`, the service's `runtime`): auto picks one of RUNTIMES per target."""
DEFAULT_RUNTIME = "auto"
RUNTIME_NAMES = {"tflm": "TFLite Micro", "c": "tinynas's generated C runtime"}

ACCOUNTINGS = tuple(Accounting)
DEFAULT_ACCOUNTING = Accounting.CHIP
LEGACY_ACCOUNTING = Accounting.ARENA
"""What a journal or card written before accountings existed was budgeted with (for TFLite Micro)."""
ACCOUNTING_NAMES = {
    "chip": "the whole footprint on the chip",
    "arena": "TFLite Micro's 32-bit arena and the .tflite alone",
    "method": "the method's tool: the 64-bit host arena rounded up to 512 B, and the .tflite",
}


def recorded_accounting(runtime: str, recorded: object = None) -> str:
    """The accounting a card or cost recorded, or (written before accountings existed) the rule it was made
    under: TFLite Micro's arena alone, or the C runtime's whole footprint (it has only ever had that one)."""
    if runtime == Runtime.C:
        return "chip"
    return recorded if isinstance(recorded, str) else LEGACY_ACCOUNTING


def check_runtime(runtime: object, allow_auto: bool = False) -> str:
    """`runtime` if it is one of RUNTIMES (or "auto" where allowed), else a one-line UsageError naming them."""
    allowed = RUNTIME_CHOICES if allow_auto else RUNTIMES
    if not isinstance(runtime, str) or runtime not in allowed:
        raise UsageError(f"unknown runtime {runtime!r}; choose one of: {', '.join(allowed)}")
    return runtime


def check_accounting(accounting: object, runtime: str | None = None) -> str:
    """`accounting` if it is one of ACCOUNTINGS and means something for `runtime`, else a one-line UsageError."""
    if not isinstance(accounting, str) or accounting not in ACCOUNTINGS:
        raise UsageError(f"unknown accounting {accounting!r}; choose one of: {', '.join(ACCOUNTINGS)}")
    if runtime == Runtime.C and accounting != Accounting.CHIP:
        raise UsageError(f"the {accounting} accounting counts TFLite Micro's arena; the C runtime is counted "
                         f"whole (accounting chip): use --runtime tflm with it")
    return accounting


@dataclass(frozen=True)
class RuntimeChoice:
    """The runtime a model is budgeted and built for, the rule that counts it, and why it was chosen."""

    runtime: str
    accounting: str
    reason: str

    def to_dict(self) -> dict:
        """JSON-ready dict (the card's `runtime_choice`)."""
        return {"runtime": self.runtime, "accounting": self.accounting, "reason": self.reason}


def target_runtimes(target: Target | None) -> tuple[str, ...]:
    """The runtimes `target` can run (every one when the target does not say)."""
    return RUNTIMES if target is None or not target.runtimes else target.runtimes


def resolve_runtime(requested: str, target: Target | None, accounting: str = DEFAULT_ACCOUNTING) -> RuntimeChoice:
    """The concrete runtime for `requested` (auto, c or tflm) on `target`, with the reason in words.

    auto: the C runtime where the target can run it (it fits more network in the same chip), else TFLite
    Micro. An explicit runtime the target says it cannot run is refused in one line. The method's and the
    arena accountings count TFLite Micro's arena, so with them auto means TFLite Micro.
    """
    check_runtime(requested, allow_auto=True)
    check_accounting(accounting, None if requested == "auto" else requested)
    possible = target_runtimes(target)
    name = target.name if target is not None else "the target"
    if requested != "auto":
        if requested not in possible:
            raise UsageError(f"target {name} cannot run {RUNTIME_NAMES[requested]} (its file lists runtimes "
                             f"{', '.join(possible)})")
        return RuntimeChoice(requested, accounting, f"--runtime {requested}")
    if accounting != Accounting.CHIP:
        if "tflm" not in possible:
            raise UsageError(f"the {accounting} accounting counts TFLite Micro, which target {name} cannot run")
        return RuntimeChoice("tflm", accounting, f"auto with the {accounting} accounting, which counts TFLite "
                                                 f"Micro's arena")
    if "c" in possible:
        return RuntimeChoice("c", accounting, "auto: it runs on any 32-bit microcontroller with a C compiler and "
                                              "fits more network than TFLite Micro in the same chip")
    return RuntimeChoice("tflm", accounting, f"auto: target {name} lists TFLite Micro only")
