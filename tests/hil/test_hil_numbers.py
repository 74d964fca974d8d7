"""`tinynas hil --port` against a board that answers numbers its firmware cannot send, through a real pseudo-terminal
(`tests/support/hil_board.py`): a 400-digit output or count, a negative count or stack, one output too few. Each
is refused in one line saying what the board answered, exit 2, and nothing is written into the model's card (a
wrong output count was scored and recorded, a negative stack shown as "0 B measured", a 400-digit number an
internal error)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hil_board import SPEC, PtyBoard, answers_for, firmware_folder, make_model

pytestmark = pytest.mark.slow  # a model converted once, then the real command per board (LiteRT, a host build)

HUGE = "9" * 400


@pytest.fixture(scope="module")
def tiny(built_once):
    """The tiny model folder, made once per run (a test works on a copy)."""
    model = built_once("hil-tiny-int8", make_model)
    return model


def _hil(model: Path, firmware: Path, **odd) -> subprocess.CompletedProcess:
    board = PtyBoard(answers_for(model, **odd))
    try:
        return subprocess.run([sys.executable, "-m", "tinynas.cli", "hil", str(model), "--port", board.port,
                               "--firmware", str(firmware), "--data", SPEC, "--timeout", "60"],
                              capture_output=True, text=True, timeout=600)
    finally:
        board.close()


def _copy(tiny: Path, tmp_path: Path) -> tuple[Path, Path]:
    model = Path(shutil.copytree(tiny, tmp_path / "model", ignore=shutil.ignore_patterns(".built")))
    return model, firmware_folder(model, tmp_path / "fw")


def test_a_board_that_answers_as_its_firmware_does_is_checked_and_recorded(tiny, tmp_path):
    model, firmware = _copy(tiny, tmp_path)
    ran = _hil(model, firmware)
    assert ran.returncode == 0, ran.stderr
    assert "8 of 8 test windows checked" in ran.stdout and "stack: 180 B measured" in ran.stdout
    recorded = json.loads((model / "card.json").read_text())["hil"]
    assert recorded["checked"] == 8 and recorded["median"] == 123456 and recorded["stack_bytes"] == 180


@pytest.mark.parametrize(("odd", "said"), [
    ({"from_window": 3, "results": f"{HUGE},1,2,3"},
     "the board answered output 1 = a 400-digit number which is not an int8 (-128 to 127); not recorded"),
    ({"from_window": 2, "counts": HUGE},
     "the board answered count 1 = a 400-digit number which is not a count of its 32-bit counter"),
    ({"from_window": 2, "results": "100,-100,5"},
     "the board answered 3 outputs which is not the 4 its profile gives (m-sizes); not recorded"),
    ({"from_window": 4, "results": "100,-100,5,-5,7"}, "the board answered 5 outputs which is not the 4"),
    ({"stack": "-8"}, "the board answered a peak stack of -8 which is not a stack size (0 to the 2,048 B the board "
                      "leaves the model); not recorded"),
    ({"from_window": 8, "counts": "-5"}, "the board answered count 1 = -5 which is not a count"),
    ({"results": "1,2,128,4"}, "the board answered output 3 = 128 which is not an int8"),
    ({"results": "1,2,0x7f,4"}, "the board answered output 3 = '0x7f' which is not an int8"),
], ids=["output-400-digits", "count-400-digits", "one-output-too-few", "one-output-too-many", "stack-negative",
        "count-negative-at-the-last-window", "output-beyond-int8", "output-in-hex"])
def test_a_number_the_firmware_cannot_send_is_refused_and_nothing_is_recorded(tiny, tmp_path, odd, said):
    model, firmware = _copy(tiny, tmp_path)
    card = (model / "card.json").read_bytes()
    ran = _hil(model, firmware, **odd)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith("tinynas: error: ") and said in last and last.endswith("; not recorded"), last
    assert ran.stdout == ""  # no report of the windows before it: none of them counts
    assert (model / "card.json").read_bytes() == card


@pytest.mark.parametrize(("odd", "said"), [
    ({"sizes": f"64,{HUGE}"}, "the board answered an output count of a 400-digit number which is not a count of "
                              "outputs (1 to 4,294,967,295); not recorded"),
    ({"sizes": "64,-4"}, "an output count of -4 which is not"),
    ({"counter": "cycles,0"}, "a counter rate of 0 which is not a rate in Hz"),
    ({"stack_available": "-1"}, "an available stack of -1 which is not a size in bytes"),
], ids=["outputs-400-digits", "outputs-negative", "counter-rate-zero", "stack-available-negative"])
def test_a_profile_the_firmware_cannot_send_is_one_line_before_any_window(tiny, tmp_path, odd, said):
    model, firmware = _copy(tiny, tmp_path)
    card = (model / "card.json").read_bytes()
    ran = _hil(model, firmware, **odd)
    assert ran.returncode == 2 and ran.stdout == ""
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinynas: error: ") and said in lines[0], ran.stderr
    assert (model / "card.json").read_bytes() == card
