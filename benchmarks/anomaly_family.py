"""Which scorer family the anomaly search exports at 4, 6 and 256 KiB, what each costs and detects, and the classical
scorer's C against its Python score (issue 59)

    nice python benchmarks/anomaly_family.py --seeds 0,1,2 [--work DIR]      # -> its section of results/anomaly.md

Each search (`fast`, 300 s budget, tflm with the arena accounted, one per seed and chip) ends with both finalists,
the network winner and the classical scorer (features + Gaussian) fitted on the same training windows, and the
family rule of `tinynas.anomaly.choice` (each family's threshold for 1 % false alarms on the validation normal
windows; the validation synthetic anomalies each flags, paired; a tie to the cheaper). Both are then measured on
what neither saw, each at its own deployed threshold (set on the study's calibration windows): every real fault
class at 0 hp and at the 1 hp development load, and file 97's later normal running for false alarms. The classical
scorer's generated C (`tinynas_prepare` then `tinynas_score`, built with the host's cc) is run on every one of those
windows against its Python score. Data (development copies only): CWRU 0 hp normal (file 97's first 70 %) to search
on, as benchmarks/anomaly.py cuts it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from anomaly import SHARED
from anomaly_saturation import cwru_searches, fault_sets
from md_blocks import write_block

RESULTS = Path(__file__).parent / "results"
TARGETS = ("STM32F030F4P6", "STM32C011F6P6", "nRF52840")

def c_against_python(scorer, threshold: float, windows: np.ndarray, work: Path) -> dict:
    """The generated C's scores and verdicts on `windows` against the Python scorer's."""
    from tinynas.anomaly.classical_c import SCORE_TOLERANCE, classical_c_card, host_scores

    _, (source, header) = classical_c_card(scorer, threshold, "tinynas")
    got = host_scores(source, header, windows, work, shutil.which("cc") or shutil.which("gcc") or "cc")
    python = scorer.score(windows)
    relative = np.abs(got[:, 0] - python) / (1 + python)
    return {"windows": len(windows), "max_relative": float(relative.max()), "tolerance": SCORE_TOLERANCE,
            "verdicts_differ": int(np.sum((got[:, 1] > 0) != (python > threshold)))}


def measure(folder: Path, sets: dict, work: Path) -> dict:
    from tinynas.anomaly.classical import ClassicalScorer
    from tinynas.anomaly.metrics import above
    from tinynas.anomaly.scoring import int8_scores
    from tinynas.anomaly.section import read_section
    from tinynas.data.preprocess import Preprocessing
    from tinynas.deploy.litert import Int8Model

    card = json.loads((folder / "card.json").read_text())
    section, choice = read_section(card), card["anomaly"]["family_choice"]
    model = Int8Model((folder / "model.tflite").read_bytes())
    prepare = Preprocessing.from_card(card).apply
    held = choice["classical"]
    scorer, threshold = ClassicalScorer.from_dict(held["scorer"]), float(held["threshold"])
    network, classical = choice["finalists"]
    row = {"chosen": choice["family"], "why": choice["why"], "p": choice["p_value"], "network": network,
           "classical": classical, "classical_cost": held["cost"], "cost": card["cost_estimate"]}
    for family, score, cut in (("network", lambda x: int8_scores(model, prepare(x), section.saturation_step),
                                section.threshold_steps), ("classical", scorer.score, threshold)):
        row[f"{family} detected"] = {name: above(score(x), cut)["rate"] for name, x in sets.items()}
    row["c"] = c_against_python(scorer, threshold, np.concatenate(list(sets.values())), work / folder.name)
    return row


def report(rows: list[dict], command: str, shared: str) -> str:
    faults = [name for name in rows[0]["network detected"] if name != "normal later"]
    lines = ["## Classical and network scorers in the same searches: which is exported, its cost and detection", "",
             f"Command: `{command}`. Machine: 2-core x86_64 VM; what shared it: {shared or 'nothing recorded'}.", "",
             "\n\n".join(__doc__.split("\n\n")[2:3]), "",
             "Per search: the family the rule chose (the validation synthetic anomalies each finalist flags, of the "
             "same windows, and the paired test's p); each family's cost on that chip (the network as the search "
             "budgets it: tflm with the arena; the classical scorer's whole generated C); the worst detection over "
             f"the {len(faults)} fault classes x loads (0 hp and 1 hp) at each family's deployed threshold, and the "
             f"false alarms on file 97's later normal running ({rows[0]['normal_later']} windows, overlapping).", "",
             "| seed | chip | chosen (p) | validation flagged: network / classical | network: RAM, flash | classical: "
             "RAM, flash | worst class detected: network / classical | false alarms: network / classical |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        net, cls = row["network detected"], row["classical detected"]
        worst = {f: min(faults, key=lambda n, d=d: d[n]) for f, d in (("network", net), ("classical", cls))}
        lines.append(
            f"| {row['seed']} | {row['target']} | **{row['chosen']}** ({row['p']:.2g}) | "
            f"{row['network']['detected']} / {row['classical']['detected']} of {row['network']['windows']} | "
            f"{row['network']['ram_bytes']:,} B, {row['network']['flash_bytes']:,} B | "
            f"{row['classical_cost']['peak_ram_bytes']:,} B, {row['classical_cost']['flash_bytes']:,} B | "
            f"{net[worst['network']]:.3f} ({worst['network']}) / {cls[worst['classical']]:.3f} ({worst['classical']}) "
            f"| {net['normal later']:.3f} / {cls['normal later']:.3f} |")
    lines += ["", "Detection per class at the 1 hp development load (mean over seeds; network / classical):", "",
              "| chip | " + " | ".join(n.replace(" 1 hp", "") for n in faults if n.endswith("1 hp")) + " |",
              "|---|" + "---|" * sum(n.endswith("1 hp") for n in faults)]
    for target in dict.fromkeys(row["target"] for row in rows):
        mine = [row for row in rows if row["target"] == target]
        cells = [f"{np.mean([r['network detected'][n] for r in mine]):.2f} / "
                 f"{np.mean([r['classical detected'][n] for r in mine]):.2f}" for n in faults if n.endswith("1 hp")]
        lines.append(f"| {target} | " + " | ".join(cells) + " |")
    worst_c = max(row["c"]["max_relative"] for row in rows)
    differ = sum(row["c"]["verdicts_differ"] for row in rows)
    lines += ["", f"The classical scorer's generated C against its Python score, on every measured window of every "
              f"search ({rows[0]['c']['windows']:,} windows each, {len(rows)} scorers): largest |C - Python| / "
              f"(1 + Python) {worst_c:.2e} (the stated tolerance: {rows[0]['c']['tolerance']:g}); verdicts that "
              f"differ: {differ}.", "",
              "Why each was chosen:", ""]
    lines += [f"- seed {row['seed']}, {row['target']}: {row['why']}" for row in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--work", default="", help="where the searches are kept (resumed there)")
    parser.add_argument("--shared", default="", help="what else ran on the machine (recorded in the results)")
    args = parser.parse_args(argv)
    if not (SHARED / "cwru" / "97.mat").exists():
        print(f"skipped: {SHARED / 'cwru'} is not here")
        return 0
    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="tinynas-family-"))
    sets = fault_sets()
    rows = []
    for cell, folder in cwru_searches(work, seeds, TARGETS):
        rows.append({"seed": cell.values["seed"], "target": cell.values["target"],
                     "normal_later": len(sets["normal later"]), **measure(folder, sets, work / "c")})
        print(json.dumps({key: rows[-1][key] for key in ("seed", "target", "chosen")}), flush=True)
    said = [f"benchmarks/{Path(__file__).name}", *(argv or sys.argv[1:])]
    RESULTS.mkdir(exist_ok=True)
    write_block(RESULTS / "anomaly.md", Path(__file__).name,
                report(rows, "nice python " + " ".join(shlex.quote(a) for a in said), args.shared))
    print(f"wrote its section of {RESULTS / 'anomaly.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
