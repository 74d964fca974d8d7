"""The search loop's side of the TensorFlow boundary: study, journal, worker pool, replay, report.

Nothing here imports TensorFlow; training happens in worker processes (`tinynas.training`).
"""

from tinynas.study.final import StudyResult
from tinynas.study.run import Study
from tinynas.study.settings import FINAL_FIDELITY, StudyError, StudySettings

__all__ = ["FINAL_FIDELITY", "Study", "StudyError", "StudyResult", "StudySettings"]
