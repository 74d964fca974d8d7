"""What `tinynas service status` prints of an anomaly scorer: the alarm is plain, and a torn status is not fatal."""

from tinynas.cli.device import status_lines

SERVING = {"running": True, "state": "SERVING", "user": "motor",
           "deployed": {"user": "motor", "model": "/d/model.tflite", "task": "anomaly",
                        "anomaly": {"threshold": 1.4, "false_alarm_rate": 0.01}}}


def test_a_raised_alarm_is_said_plainly():
    lines = status_lines({**SERVING, "alarm": {"raised": True, "since": 1.7e9, "score": 5.1, "threshold": 1.4,
                                               "debounce": "3 of the last 5 windows above the threshold"}})
    assert "serving the anomaly scorer /d/model.tflite for motor (threshold 1.4, set for 1.00% false alarms)" \
        in "\n".join(lines)
    assert any(line.startswith("  ALARM: the machine does not run normally since ") for line in lines)


def test_no_alarm_and_a_damaged_alarm_section():
    lines = status_lines({**SERVING, "alarm": {"raised": False, "score": 0.2, "threshold": 1.4}})
    assert any("no alarm: the machine runs normally (last score 0.2, threshold 1.4" in line for line in lines)
    assert status_lines({**SERVING, "alarm": "torn", "deployed": {**SERVING["deployed"], "anomaly": None}})
