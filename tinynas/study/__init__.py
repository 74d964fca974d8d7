"""The search loop's side of the TensorFlow boundary: study, journal, worker pool, replay, report.

Nothing here imports TensorFlow; training happens in worker processes (`tinynas.training`).
"""

from tinynas.study.run import FINAL_FIDELITY, Study, StudyError, StudyResult, parse_duration

__all__ = ["FINAL_FIDELITY", "Study", "StudyError", "StudyResult", "parse_duration"]
