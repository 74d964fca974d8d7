"""A summary of a `Windows` for people: counts per class, shape, rate, groups, sessions, value range."""

from __future__ import annotations

import numpy as np

from tinynas.data.windows import Windows


def compact_names(names: list[str], order: tuple[str, ...]) -> str:
    """Class names as runs of the class order: "A..R", "normal, IR007..B021" (3+ in a row become a run)."""
    indices = sorted(order.index(name) for name in names)
    runs: list[list[int]] = []
    for index in indices:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    parts = []
    for run in runs:
        if len(run) >= 3:
            parts.append(f"{order[run[0]]}..{order[run[-1]]}")
        else:
            parts += [order[i] for i in run]
    return ", ".join(parts)


def _per_session(windows: Windows) -> list[dict]:
    """Windows and classes of each session (recording day, CWRU load): what a held-out split can use."""
    if windows.sessions is None:
        return []
    rows = []
    for session in sorted(set(windows.sessions.tolist())):
        labels = np.unique(windows.y[windows.sessions == session])
        rows.append({"session": session, "windows": int(np.sum(windows.sessions == session)),
                     "classes": [windows.class_names[i] for i in labels]})
    return rows


def describe_windows(windows: Windows) -> dict:
    """JSON-ready facts about `windows` (what `tinynas data inspect` prints)."""
    counts = np.bincount(windows.y, minlength=windows.classes)
    return {
        "windows": len(windows), "window_length": windows.window_length, "channels": windows.channels,
        "sample_rate_hz": windows.sample_rate_hz,
        "window_seconds": windows.window_length / windows.sample_rate_hz,
        "channel_names": list(windows.channel_names) or [f"ch{i}" for i in range(windows.channels)],
        "classes": windows.classes,
        "class_names": list(windows.class_names),
        "counts": {name: int(count) for name, count in zip(windows.class_names, counts)},
        "groups": int(len(np.unique(windows.groups))),
        "sessions": sorted(set(windows.sessions.tolist())) if windows.sessions is not None else [],
        "per_session": _per_session(windows),
        "min": float(windows.x.min()), "max": float(windows.x.max()),
        "mean": float(windows.x.mean()), "std": float(windows.x.std()),
        "provenance": windows.provenance,
    }


def _session_line(row: dict, summary: dict) -> str:
    """ "2020-06-26: 486 windows, 18 classes (A..R)", plus load and speed for a CWRU condition."""
    names = row["classes"]
    listed = "all" if len(names) == summary["classes"] else compact_names(names, tuple(summary["class_names"]))
    line = f"{row['session']}: {row['windows']} windows, {len(names)} classes ({listed})"
    condition = summary["provenance"].get("conditions", {}).get(row["session"])
    if condition:
        rpm = condition.get("rpm") or []
        speed = (f"{rpm[0]:g} rpm" if len(rpm) == 1 else f"{rpm[0]:g}-{rpm[-1]:g} rpm") if rpm else "rpm unknown"
        if condition.get("load_hp") is not None:
            line += f"; load {condition['load_hp']} hp, {speed} (nominal {condition['nominal_rpm']})"
    return line


# Provenance keys shown in their own lines above, not repeated raw.
_SHOWN = ("per_file", "conditions", "missing", "sessions")


def format_summary(spec: str, summary: dict) -> str:
    """What `tinynas data inspect` prints for people (the --json output is `summary` itself)."""
    lines: list[str] = []
    lines.append(f"{spec}")
    lines.append(f"  windows   {summary['windows']} x {summary['window_length']} samples x {summary['channels']} "
                 f"channels at {summary['sample_rate_hz']:g} Hz ({summary['window_seconds']:.3g} s each)")
    lines.append(f"  channels  {', '.join(summary['channel_names'])}")
    lines.append(f"  groups    {summary['groups']} recordings")
    rows = summary.get("per_session", [])
    if rows:
        lines.append(f"  sessions  {len(rows)} (recording days or conditions):")
        lines += [f"    {_session_line(row, summary)}" for row in rows]
    else:
        lines.append("  sessions  none")
    missing = summary["provenance"].get("missing")
    if missing:
        lines.append(f"  missing   {len(missing)} file(s) of the set, skipped: {', '.join(missing)}")
    lines.append(f"  values    min {summary['min']:.4g}, max {summary['max']:.4g}, mean {summary['mean']:.4g}, "
                 f"std {summary['std']:.4g}")
    lines.append(f"  classes   {summary['classes']}:")
    for name, count in summary["counts"].items():
        lines.append(f"    {name:<12}{count}")
    split = summary["split"]
    if "error" in split:
        lines.append(f"  split     impossible: {split['error']}")
    else:
        lines.append(f"  split     {split['train']}/{split['val']}/{split['test']}: {split['protocol']}")
        if split.get("held_out"):
            lines.append(f"  held out  validation on session {split['held_out']}: selection ranks what transfers")
        elif split.get("held_out_reason"):
            lines.append(f"  held out  none: {split['held_out_reason']}")
    for key, value in summary["provenance"].items():
        if key not in _SHOWN:
            lines.append(f"  {key:<9} {value}")
    for finding in summary["findings"]:
        lines.append(f"  {finding['severity'].upper():<9} {finding['message']}")
    if not summary["findings"]:
        lines.append("  checks    no flat or saturated channel, no mixed-up labels, classes balanced")
    return "\n".join(lines)
