"""Which runtime a model is budgeted for (`--runtime auto` and the target's word) and how it is counted."""

import pytest

from tinynas.card import ModelCard
from tinynas.cost.estimate import Cost, estimate
from tinynas.cost.runtime import ACCOUNTINGS, RUNTIME_CHOICES, check_accounting, resolve_runtime
from tinynas.cost.targets import TargetError, builtin_targets, load_target_file
from tinynas.errors import UsageError
from tinynas.space import Architecture
from tinynas.study.settings import StudySettings, check_resumable, fingerprint
from tinynas.trial import Fidelity


@pytest.mark.parametrize("key", sorted(builtin_targets()))
def test_auto_picks_the_c_runtime_on_every_built_in_target_and_says_why(key):
    choice = resolve_runtime("auto", builtin_targets()[key])
    assert (choice.runtime, choice.accounting) == ("c", "chip")
    assert choice.reason.startswith("auto:") and "more network" in choice.reason


def test_an_explicit_runtime_is_kept_and_auto_follows_the_target_file(tmp_path):
    chip = builtin_targets()["stm32c011f6p6"]
    assert resolve_runtime("tflm", chip).runtime == "tflm"
    assert resolve_runtime("c", chip).reason == "--runtime c"
    only_tflm = tmp_path / "board.toml"
    only_tflm.write_text('name = "vendor board"\nram_bytes = 65536\nflash_bytes = 262144\ncoremark = 200\n'
                         'core = "Cortex-M33"\nruntimes = ["tflm"]\n')
    board = load_target_file(only_tflm)
    assert board.runtimes == ("tflm",) and board.to_dict()["runtimes"] == ["tflm"]
    assert resolve_runtime("auto", board).runtime == "tflm"
    with pytest.raises(UsageError, match="target vendor board cannot run tinynas's generated C runtime"):
        resolve_runtime("c", board)
    # A target that says nothing keeps its old dict (resume fingerprints of older journals still match).
    assert "runtimes" not in chip.to_dict()


@pytest.mark.parametrize("text", ['runtimes = []', 'runtimes = ["tvm"]', 'runtimes = "c"'])
def test_a_target_file_with_a_bad_runtime_list_is_one_line(tmp_path, text):
    path = tmp_path / "board.toml"
    path.write_text(f'name = "b"\nram_bytes = 4096\nflash_bytes = 16384\ncoremark = 100\n{text}\n')
    with pytest.raises(TargetError, match="'runtimes' must be a non-empty list of tflm, c"):
        load_target_file(path)


def test_the_method_and_arena_accountings_are_for_tflite_micro():
    assert RUNTIME_CHOICES == ("auto", "c", "tflm") and ACCOUNTINGS == ("chip", "arena", "method")
    chip = builtin_targets()["stm32f030f4p6"]
    assert resolve_runtime("auto", chip, "method").runtime == "tflm"
    with pytest.raises(UsageError, match="the method accounting counts TFLite Micro's arena"):
        check_accounting("method", "c")
    with pytest.raises(UsageError, match="unknown accounting 'vendor'"):
        StudySettings(accounting="vendor")
    with pytest.raises(UsageError, match="unknown runtime 'tvm'; choose one of: auto, c, tflm"):
        StudySettings(runtime="tvm")
    arch = Architecture(512, 1, 10, k=2, c=1)
    method = estimate(arch, accounting="method")
    assert method.peak_ram_bytes % 512 == 0 and method.flash_bytes == method.model_bytes


def _print(settings: dict) -> dict:
    return fingerprint(data_digest="d", target={}, strategy="paper", seed=0, fidelity=Fidelity(), space={},
                       split="s", normalize="none", test_data_digest=None, final_fidelity=Fidelity(), **settings)


def test_an_older_journal_resumes_only_under_the_rule_it_was_searched_with():
    """Journals written before accountings existed have no runtime and no accounting: TFLite Micro's arena."""
    older = _print({})
    assert "runtime" not in older and "accounting" not in older
    assert _print({"runtime": "tflm", "accounting": "arena"}) == older
    check_resumable(older, _print({"runtime": "tflm", "accounting": "arena"}), Fidelity())
    with pytest.raises(Exception,
                       match="runtime differ .*searched with --runtime tflm --accounting arena: resume with that"):
        check_resumable(older, _print({"runtime": "c", "accounting": "chip"}), Fidelity())
    with pytest.raises(Exception, match="accounting differ .*--runtime tflm --accounting arena"):
        check_resumable(older, _print({"runtime": "tflm", "accounting": "chip"}), Fidelity())
    # A C-runtime journal (always counted whole) still resumes as it was.
    assert _print({"runtime": "c", "accounting": "chip"}) == {**older, "runtime": "c"}


def test_older_cards_and_costs_read_as_the_arena_accounting():
    card = {"runtime": "tflm", "cost_estimate": {"peak_ram_bytes": 3712, "runtime": "tflm"}}
    assert ModelCard.from_dict(card).accounting == "arena"
    assert ModelCard.from_dict({**card, "runtime": "c"}).accounting == "chip"
    assert ModelCard.from_dict({**card, "runtime_choice": {"accounting": "method"}}).accounting == "method"
    older = {key: value for key, value in estimate(Architecture(64, 1, 4, k=1, c=0), accounting="arena")
             .to_dict().items() if key in ("macs", "params", "flash_bytes", "arena_head_bytes", "arena_tail_bytes",
                                           "arena_bytes", "peak_ram_bytes", "abi", "runtime")}
    assert Cost.from_dict(older).accounting == "arena"
    assert Cost.from_dict({**older, "a key of a newer tinynas": 1}).peak_ram_bytes == older["peak_ram_bytes"]
