import io
import logging

from tinynas.progress import Progress


def test_terminal_progress_redraws_one_line():
    stream = io.StringIO()
    progress = Progress(stream=stream, interactive=True, width=10)
    progress.update(0.5, "candidate 3 | best A(2,1)")
    progress.update(0.6, "candidate 4")
    progress.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and "[#####.....] candidate 3" in text and text.endswith("\n")


def test_service_logs_get_plain_lines(caplog):
    stream = io.StringIO()
    progress = Progress(stream=stream, interactive=False)
    with caplog.at_level(logging.INFO, logger="tinynas.progress"):
        progress.update(0.1, "candidate 1")
        progress.update(0.2, "candidate 2")  # within 30 s of the last: not repeated
        progress.event("trial 1 done")
    assert stream.getvalue() == ""
    assert [r.getMessage() for r in caplog.records] == ["candidate 1", "trial 1 done"]
