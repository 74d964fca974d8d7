"""A summary of a `Windows` for people: counts per class, shape, rate, groups, value range."""

from __future__ import annotations

import numpy as np

from tinynas.data.windows import Windows


def describe_windows(windows: Windows) -> dict:
    """JSON-ready facts about `windows` (what `tinynas data inspect` prints)."""
    counts = np.bincount(windows.y, minlength=windows.classes)
    return {
        "windows": len(windows), "window_length": windows.window_length, "channels": windows.channels,
        "sample_rate_hz": windows.sample_rate_hz,
        "window_seconds": windows.window_length / windows.sample_rate_hz,
        "channel_names": list(windows.channel_names) or [f"ch{i}" for i in range(windows.channels)],
        "classes": windows.classes,
        "counts": {name: int(count) for name, count in zip(windows.class_names, counts)},
        "groups": int(len(np.unique(windows.groups))),
        "sessions": sorted(set(windows.sessions.tolist())) if windows.sessions is not None else [],
        "min": float(windows.x.min()), "max": float(windows.x.max()),
        "mean": float(windows.x.mean()), "std": float(windows.x.std()),
        "provenance": windows.provenance,
    }


def format_summary(spec: str, summary: dict) -> str:
    """What `tinynas data inspect` prints for people (the --json output is `summary` itself)."""
    lines: list[str] = []
    lines.append(f"{spec}")
    lines.append(f"  windows   {summary['windows']} x {summary['window_length']} samples x {summary['channels']} channels "
                 f"at {summary['sample_rate_hz']:g} Hz ({summary['window_seconds']:.3g} s each)")
    lines.append(f"  channels  {', '.join(summary['channel_names'])}")
    lines.append(f"  groups    {summary['groups']} recordings; sessions: {summary['sessions'] or 'none'}")
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
    for key, value in summary["provenance"].items():
        if key != "per_file":
            lines.append(f"  {key:<9} {value}")
    for finding in summary["findings"]:
        lines.append(f"  {finding['severity'].upper():<9} {finding['message']}")
    if not summary["findings"]:
        lines.append("  checks    no flat or saturated channel, no mixed-up labels, classes balanced")
    return "\n".join(lines)
