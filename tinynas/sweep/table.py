"""A sweep's results: one row per cell (Markdown and CSV), the mean over seeds, and the cheapest target that reaches
a goal where the grid spans targets. Figures come from each cell's model card (read as untrusted, `read_card`)."""

from __future__ import annotations

import csv
import io
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from tinynas.atomic import atomic_write_bytes, atomic_write_text
from tinynas.card import DamagedCard, ModelCard, read_card
from tinynas.errors import TinynasError
from tinynas.modes import CellStatus
from tinynas.sweep.run import Sweep
from tinynas.verdict import wilson

COLUMNS = ("accuracy", "hits", "windows", "unit", "interval_low", "interval_high", "ram_bytes", "flash_bytes", "macs",
           "target_ram_bytes", "target_flash_bytes", "seconds", "status")


def rows(sweep: Sweep) -> list[dict[str, Any]]:
    """Each cell's options and figures (None where the cell failed or its card is unreadable)."""
    out = []
    for cell in sweep.cells:
        row: dict[str, Any] = {**cell.values, **dict.fromkeys(COLUMNS), "status": cell.status, "seconds": cell.seconds}
        if cell.status == CellStatus.DONE:
            try:
                card = read_card(cell.folder(sweep.out))
            except DamagedCard as exc:
                row["status"] = f"card unreadable: {exc}"
            else:
                row.update(_figures(card))
        elif cell.error:
            row["status"] = f"failed: {cell.error}"
        out.append(row)
    return out


def _figures(card: ModelCard) -> dict[str, Any]:
    """A finished cell's figures through the card's typed readers (a section unreadable: its columns stay empty)."""
    figures: dict[str, Any] = {}
    held = card.held_out()
    if held is not None and held.windows > 0:
        low, high = wilson(held.hits, held.windows)
        # hits of windows, or of the recordings overlapping test windows were cut from (their "unit")
        figures.update(accuracy=held.hits / held.windows, hits=held.hits, windows=held.windows,
                       interval_low=round(low, 4), interval_high=round(high, 4), unit=held.unit)
    try:
        cost = card.cost()
        figures.update(ram_bytes=cost.peak_ram_bytes, flash_bytes=cost.flash_bytes, macs=cost.macs)
    except (TinynasError, TypeError, ValueError, KeyError, AttributeError):
        pass
    try:
        target = card.chip_target()
        figures.update(target_ram_bytes=target.ram_bytes, target_flash_bytes=target.flash_bytes)
    except TinynasError:
        pass
    return figures


def write_tables(sweep: Sweep, goal: float | None = None) -> str:
    """Write DIR/sweep.md and DIR/sweep.csv; return the Markdown."""
    table = rows(sweep)
    axes = sweep.grid.varied()
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*axes, *COLUMNS], extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    atomic_write_text(sweep.out / "sweep.csv", buffer.getvalue())
    counts = sweep.counts()
    lines = [f"# Sweep of {len(sweep.cells)} searches in {sweep.out}", "",
             f"{counts['done']} done, {counts['failed']} failed, {counts['running'] + counts['pending']} not run. "
             f"Fixed: {_fixed(sweep)}. Accuracy: int8, on each search's own test windows (count and 95 % Wilson "
             f"interval; over the recordings, each by most of its windows, where windows share them); RAM, flash "
             f"and MACs: the cost model's estimate for the target.", "",
             "| cell | " + " | ".join(axes) + " | int8 accuracy | RAM | flash | MACs | wall | status |",
             "|---" * (len(axes) + 7) + "|"]
    for number, row in enumerate(table, 1):
        lines.append(f"| {number} | " + " | ".join(str(row[axis]) for axis in axes) + f" | {_accuracy(row)} | "
                     f"{_kib(row['ram_bytes'])} | {_kib(row['flash_bytes'])} | {_count(row['macs'])} | "
                     f"{row['seconds']:.0f} s | {row['status']} |")
    pooled = _pooled_with_seeds(sweep)
    kept = [a for a in axes if a not in pooled]
    groups = _groups(table, kept)
    if "seed" in axes and len(sweep.grid.values("seed")) > 1 and any(len(values) > 1 for values in groups.values()):
        together = f" (each with its own {', '.join(a for a in pooled if a != 'seed')})" if len(pooled) > 1 else ""
        lines += ["", f"## Over seeds{together}", "", "| " + " | ".join(kept)
                  + " | seeds | mean int8 accuracy ± sd |", "|---" * (len(kept) + 2) + "|"]
        for key, values in groups.items():
            lines.append("| " + " | ".join(map(str, key)) + f" | {len(values)} | {_mean_sd(values)} |")
    if "target" in axes and goal is not None:
        lines += ["", f"## The cheapest target reaching {goal:.0%}", "",
                  *_cheapest(table, [a for a in kept if a != "target"], goal)]
    if any(row["accuracy"] is not None for row in table):
        plot(table, axes, sweep.out / "sweep.png")
        lines += ["", "![int8 accuracy against the estimated RAM, one point per cell](sweep.png)"]
    text = "\n".join(lines) + "\n"
    atomic_write_text(sweep.out / "sweep.md", text)
    return text


def plot(table: list[dict], axes: list[str], path: Path) -> None:
    """Each finished cell's int8 accuracy (its 95 % interval as a bar) against the estimated RAM of its model,
    coloured by the first varied option that is not the seed: the trade-off the grid was run to see."""
    import matplotlib

    matplotlib.use("Agg")  # headless: a Pi or a CI machine has no display
    from matplotlib import pyplot

    colour_by = next((axis for axis in axes if axis != "seed"), None)
    groups: dict[Any, list[dict]] = defaultdict(list)
    for row in table:
        if row["accuracy"] is not None and row["ram_bytes"] is not None:
            groups[row[colour_by] if colour_by else ""].append(row)
    figure, axis = pyplot.subplots(figsize=(6.4, 4.0), dpi=100)
    for value, cells in groups.items():
        ram = [cell["ram_bytes"] / 1024 for cell in cells]
        accuracy = [cell["accuracy"] for cell in cells]
        errors = [[cell["accuracy"] - cell["interval_low"] for cell in cells],
                  [cell["interval_high"] - cell["accuracy"] for cell in cells]]
        label = f"{colour_by}={value}"[:60] if colour_by else None
        axis.errorbar(ram, accuracy, yerr=errors, fmt="o", capsize=3, label=label)
    axis.set_xlabel("estimated RAM of the model (KiB)")
    axis.set_ylabel("int8 accuracy (95 % interval)")
    axis.set_ylim(0, 1.02)
    axis.grid(alpha=0.3)
    if colour_by:
        axis.legend(fontsize="small")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    pyplot.close(figure)
    atomic_write_bytes(path, buffer.getvalue())


def _groups(table: list[dict], keys: list[str]) -> dict[tuple, list[float]]:
    groups: dict[tuple, list[float]] = defaultdict(list)
    for row in table:
        if row["accuracy"] is not None:
            groups[tuple(row[key] for key in keys)].append(row["accuracy"])
    return groups


def _pooled_with_seeds(sweep: Sweep) -> list[str]:
    """What a mean over seeds pools: the seed, and what varies with it in [[cells]] (a data set drawn per seed)."""
    coupled = list(sweep.grid.together[0]) if sweep.grid.together else []
    return coupled if "seed" in coupled else ["seed"]


def _cheapest(table: list[dict], others: list[str], goal: float) -> list[str]:
    """Per combination of `others` (the varied options but the target and what the seeds pool): the target with the
    least RAM (then flash) whose cells all finished and whose mean accuracy reaches `goal`."""
    by_case: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in table:
        by_case[tuple(row[a] for a in others)][row["target"]].append(row)
    lines = []
    for case, targets in by_case.items():
        where = ", ".join(f"{a}={v}" for a, v in zip(others, case)) or "the grid"
        reaching = []
        for target, cells in targets.items():
            accuracies = [c["accuracy"] for c in cells if c["accuracy"] is not None]
            if len(accuracies) == len(cells) and statistics.mean(accuracies) >= goal:
                cost = (cells[0]["target_ram_bytes"] or 0, cells[0]["target_flash_bytes"] or 0)
                reaching.append((cost, target, statistics.mean(accuracies), len(cells)))
        if reaching:
            _, target, mean, count = min(reaching)
            lines.append(f"- {where}: **{target}** (mean int8 accuracy {mean:.3f} over {count} cell(s))")
        else:
            lines.append(f"- {where}: none of the targets reached {goal:.0%} in every cell")
    return lines


def _fixed(sweep: Sweep) -> str:
    return ", ".join(f"{k}={v}" for k, v in sweep.grid.fixed.items()) or "nothing"


def _accuracy(row: dict) -> str:
    if row["accuracy"] is None:
        return "-"
    low, high = row["interval_low"], row["interval_high"]
    unit = " recordings" if row.get("unit") == "recordings" else ""
    return f"{row['accuracy']:.3f} ({row['hits']}/{row['windows']}{unit}, {low:.2f}-{high:.2f})"


def _mean_sd(values: list[float]) -> str:
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def _kib(value) -> str:
    return "-" if value is None else f"{value / 1024:.1f} KiB"


def _count(value) -> str:
    return "-" if value is None else f"{value / 1e6:.2f} M" if value >= 1e5 else f"{value:,}"


