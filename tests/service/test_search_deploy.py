"""The service's SEARCHING step hands its configuration to the study."""

from types import SimpleNamespace

import pytest

from tinynas.data.spec import load_windows
from tinynas.service import search_deploy
from tinynas.service.config import ServiceConfig
from tinynas.service.context import Phase, to

DATA = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1"


@pytest.mark.parametrize("runtime", ["tflm", "c"])
def test_the_search_budgets_for_the_configured_runtime(tmp_path, monkeypatch, runtime):
    started = {}

    class RecordedStudy:
        def __init__(self, out, windows, target, **options):
            started.update(options, out=out, target=target)

        def run(self):
            started["ran"] = True

    monkeypatch.setattr(search_deploy, "Study", RecordedStudy)
    monkeypatch.setattr(search_deploy, "session_windows", lambda service: (load_windows(DATA), DATA))
    service = SimpleNamespace(config=ServiceConfig(runtime=runtime, data_dir=str(tmp_path)), workers=None,
                              state=SimpleNamespace(study=str(tmp_path / "study"), user="u", deployed=None,
                                                    plan="bearing4"))
    transition = search_deploy.search(service)  # the step returns where it ends; nothing is saved by it
    # The chip's budget, built once from the config and passed whole (issue 69): its runtime is the configured one.
    assert started["ran"] and started["target"].runtime == runtime and started["task"] == "classify"
    assert "runtime" not in started and started["target"] == service.config.chip_budget()
    assert started["data_findings"] == []  # the service checked the recording: the study does not again
    assert transition == to(Phase.DEPLOYING)
