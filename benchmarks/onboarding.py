"""The onboarding journey through the real service, with the product's simulated person or machine, timed.

    nice python benchmarks/onboarding.py --plan gestures4 --source isl:../shared/data/isl --strategy fast \\
        --budget 5m --name gestures4-fast
    nice python benchmarks/onboarding.py --plan bearing4-cwru --machine --source "cwru:../shared/data/cwru" ...

Starts `tinynas simulate --person` (or `--machine`) on a pseudo-terminal and `tinynas service run` as a new
user would, asks for an onboarding (`tinynas onboard`) and follows the status until the model is served (or
refused): the time of each phase (collection, search, deploy), the pauses, the held-out accuracy. Served, the
person goes on signing and resting (`--serving-check`) for `--serve-seconds`, and the live predictions are
judged against what was played: idle windows answered as rest or unknown, and signs recognised. Writes the
journey log to benchmarks/results/journeys/NAME.log and its figures to NAME.json; `--summary` rewrites
benchmarks/results/onboarding.md from every journey's JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
JOURNEYS = RESULTS / "journeys"
PLANS = Path(__file__).parent / "plans"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def wilson(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson interval of a proportion."""
    if total == 0:
        return (math.nan, math.nan)
    p = successes / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return (max(0.0, centre - half), min(1.0, centre + half))


def played_signs(person: list[dict], since: int, margin: int) -> list[tuple[str, int, int]]:
    """(label, first sample, samples) of every sign the person played that ends after `since`. One sign is played in
    chunks (one per block the simulator reads); their device indices are exact only to a frame, so a chunk may start
    a little before the previous one ended: same sign, overlapping or within `margin` of it, is the same sign."""
    played: list[list] = []
    for event in person:
        if "played" not in event:
            continue
        first, count = event["device_first"], event["samples"]
        if played and played[-1][0] == event["played"] and \
                played[-1][1] <= first <= played[-1][1] + played[-1][2] + margin:
            played[-1][2] = max(played[-1][2], first + count - played[-1][1])
        else:
            played.append([event["played"], first, count])
    return [(label, first, count) for label, first, count in played if first + count > since]


def live_figures(predictions: list[dict], person: list[dict], window: int, since_sample: int, margin: int) -> dict:
    """Idle and sign windows among the live predictions, judged against what the person played."""
    played = [list(sign) for sign in played_signs(person, since_sample, margin)]  # the serving check's only
    if not played:
        return {}
    begin, end = played[0][1], played[-1][1] + played[-1][2]
    idle = signs = idle_right = signs_right = signs_unknown = 0
    for prediction in predictions:
        last = prediction["end_sample"]
        first = last - window
        if first < max(begin - 4 * window, since_sample) or last > end:
            continue
        inside = [p for p in played if p[1] + margin <= first and last <= p[1] + p[2] - margin]
        touching = [p for p in played if first < p[1] + p[2] + margin and p[1] - margin < last]
        if inside:
            signs += 1
            signs_right += prediction["label"] == inside[0][0]
            signs_unknown += prediction["label"] == "unknown"
        elif not touching:
            idle += 1
            idle_right += prediction["label"] in ("rest", "unknown")
    return {"idle_windows": idle, "idle_as_rest_or_unknown": idle_right, "sign_windows": signs,
            "signs_recognised": signs_right, "signs_unknown": signs_unknown,
            "signs_wrong": signs - signs_right - signs_unknown, "signs_performed": len(played),
            "since_sample": since_sample, "window": window}


def person_lines(events: list[dict]) -> list[str]:
    """The person's reactions, the machine's states and the replugs, one line each (not the serving check's
    played signs)."""
    lines = []
    for e in events:
        if "asked" in e:
            made = "nothing" if e["made"] is None else e["made"]
            late = " (late)" if e["reaction_seconds"] >= 0.7 else ""
            lines.append(f"prompt {e.get('number')}, attempt {e.get('attempt')}: asked {e['asked']}, made {made} "
                         f"{e['reaction_seconds']:.2f} s after GO{late} (seen {e.get('seen_after_go', 0):.2f} s after)")
        elif "state" in e or "confirmed" in e:
            what = f"confirmed {e['confirmed']}" if "confirmed" in e else f"state {e['state']}"
            lines.append(f"machine: {what}")
        elif "unplugged" in e:
            lines.append(f"unplugged for {e['unplugged']:g} s (device restarts: {e.get('restart')})")
        elif "continued" in e:
            lines.append(f"continued the paused collection: {e['continued'][:120]}")
    return lines


def _page(http_port: int) -> dict:
    """The status page's JSON, as the browser gets it (the served model's card read, the hop applied)."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/status.json", timeout=30) as answer:
            value = json.loads(answer.read())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def run(args: argparse.Namespace) -> dict:
    work = Path(args.work or tempfile.mkdtemp(prefix="tinynas-journey-"))
    work.mkdir(parents=True, exist_ok=True)
    data, port, http_port = work / "data", work / "ttyJOURNEY", _free_port()
    plan = str(PLANS / f"{args.plan}.toml") if (PLANS / f"{args.plan}.toml").exists() else args.plan
    config = work / "tinynas.toml"
    config.write_text(f'port = "{port}"\ndata_dir = "{data}"\ntarget = "{args.target}"\nbudget = "{args.budget}"\n'
                      f'strategy = "{args.strategy}"\nplan = "{plan}"\nhttp_port = {http_port}\n'
                      f'workers = "{args.workers}"\n')
    person_log, service_log = work / "person.jsonl", open(work / "service.log", "w")
    who = ["--machine"] if args.machine else ["--person", "--serving-check"]
    tinynas = [sys.executable, "-m", "tinynas.cli"]
    simulator = subprocess.Popen(tinynas + ["simulate", *who, "--source", args.source, "--port", str(port),
                                            "--follow", f"http://127.0.0.1:{http_port}/status.json",
                                            "--config", str(config), "--log", str(person_log),
                                            "--seed", str(args.seed)] +
                                 (["--unplug-every", str(args.unplug_every)] if args.unplug_every else []),
                                 stdout=service_log, stderr=subprocess.STDOUT)
    service = subprocess.Popen(tinynas + ["service", "run", "--config", str(config)], stdout=service_log,
                               stderr=subprocess.STDOUT)
    started = time.monotonic()
    transitions: list[tuple[str, float]] = []
    result: dict = {"name": args.name, "plan": args.plan, "source": args.source, "strategy": args.strategy,
                    "budget": args.budget, "target": args.target, "machine": bool(args.machine),
                    "cores": os.cpu_count(), "unplug_every": args.unplug_every}
    status: dict = {}
    try:
        while _read_json(data / "status.json").get("state") != "IDLE":
            if time.monotonic() - started > 300 or service.poll() is not None:
                raise RuntimeError("the service did not come up; see service.log")
            time.sleep(0.5)
        asked = time.monotonic()
        subprocess.run(tinynas + ["onboard", "--user", "journey", "--plan", plan, "--config", str(config)],
                       check=True, stdout=service_log, stderr=subprocess.STDOUT)
        pauses, last_pause = 0, ""
        deadline = asked + args.timeout
        while time.monotonic() < deadline:
            status = _read_json(data / "status.json")
            state = status.get("state", "")
            if state and (not transitions or transitions[-1][0] != state):
                transitions.append((state, round(time.monotonic() - asked, 1)))
                print(f"{transitions[-1][1]:8.1f} s  {state}", file=sys.stderr, flush=True)
            if status.get("paused") and status["paused"] != last_pause:
                pauses, last_pause = pauses + 1, status["paused"]
            if len(transitions) > 1 and state in ("SERVING", "IDLE") and transitions[-2][0] == "DEPLOYING":
                break
            if state == "IDLE" and status.get("error") and len(transitions) > 1:
                break
            time.sleep(0.5)
        served = status.get("state") == "SERVING" and status.get("deployed")
        result.update(transitions=transitions, pauses=pauses, error=status.get("error", ""),
                      served=bool(served), gate=status.get("gate") or {})
        times = dict(transitions)
        if "SEARCHING" in times:
            result["collection_seconds"] = times["SEARCHING"] - times.get("COLLECTING", 0.0)
        if "DEPLOYING" in times and "SEARCHING" in times:
            result["search_seconds"] = times["DEPLOYING"] - times["SEARCHING"]
        if served and "DEPLOYING" in times:
            result["deploy_seconds"] = times["SERVING"] - times["DEPLOYING"]
            deployed = status["deployed"]
            card = _read_json(Path(deployed["card"]))
            result.update(accuracy=deployed["accuracy"], serving=deployed.get("serving", {}),
                          model=card.get("architecture") or card.get("name"), classes=deployed.get("classes"),
                          test_windows=(card.get("split") or {}).get("test"))
            # What the status page says of the served model's time on the chip against the hop (issue 66).
            page = _page(http_port)
            result["page_time"] = ((page.get("model") or {}).get("time")) if page else None
            # Every accepted window read back against the CRC-32 it was accepted with (replugs included).
            from tinynas.data.session import load_session

            session = Path(deployed["session"])
            result.update(session_windows=len(load_session(session)),
                          changed_windows=load_session(session).provenance["changed_windows"],
                          device_restarts=sum('"reset"' in line for line in
                                              (session / "events.jsonl").read_text().splitlines()))
            if not args.machine and args.serve_seconds:
                since = max((p["end_sample"] for p in status.get("predictions") or []), default=0)
                time.sleep(args.serve_seconds)
                predictions = _lines(data / "predictions.jsonl")
                rate = (status.get("device") or {}).get("sample_rate_hz") or 200.0
                window = int(round(float(deployed["plan"]["window_seconds"]) * rate))
                result["live"] = live_figures(predictions, _lines(person_log), window, since, margin=16)
        reactions = [e for e in _lines(person_log) if "asked" in e]
        result["person"] = {"prompts_reacted": len(reactions),
                            "late_starts": sum(e["reaction_seconds"] >= 0.7 for e in reactions),
                            "missed": sum(e["made"] is None and e["asked"] != "rest" and e["asked"] in
                                          (result.get("classes") or [e["asked"]]) for e in reactions),
                            "wrong": sum(e["made"] not in (None, e["asked"]) for e in reactions),
                            "unplugs": sum("unplugged" in e for e in _lines(person_log))}
    finally:
        for process in (service, simulator):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        service_log.close()
    JOURNEYS.mkdir(parents=True, exist_ok=True)
    (JOURNEYS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    log_lines = [f"# journey {args.name}: {' '.join(sys.argv[1:])}"]
    log_lines += [f"{seconds:8.1f} s  {state}" for state, seconds in transitions]
    log_lines += ["", "## what the simulated person (or machine) did", *person_lines(_lines(person_log))]
    log_lines += ["", "## service and simulator output (INFO lines)"]
    log_lines += [line for line in (work / "service.log").read_text().splitlines() if "Traceback" not in line][-400:]
    (JOURNEYS / f"{args.name}.log").write_text("\n".join(log_lines) + "\n")
    return result


def _fmt(value, digits=1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _why_not(journey: dict) -> str:
    gate = journey.get("gate") or {}
    if gate.get("decision") == "undecided":
        return f"one more step ({gate.get('text', '')}; {gate.get('more_per_class')} more per class asked)"
    return journey.get("error", "")


SETS = {
    "g4r15-before": "5bc0912, before issue 54 (candidates ranked on the split's 4 validation windows; the gate's ask "
                    "unbounded; no unknown threshold below 20 correct validation answers)",
    "g4r15-after": "1a3b0b1, issue 54 (cross-validated selection, the winner trained on training and validation "
                   "windows, the unknown threshold set on out-of-fold answers, the gate's ask bounded)",
}
"""What code each set of seeds ran."""
SETS_SHARED = ("What shared the machine during the g4r15 sets (2026-12-06): the two journeys of a seed side by side; "
               "targeted unit tests and the slow test tier once (`nice -n 19`), two `tinynas demo` runs (`nice -n 19`) "
               "during seeds 1-3; the live figures were judged again after the runs from the journeys' kept working "
               "folders (`--rejudge`), which splits the signs not recognised into unknown and wrong answers.")


def seeds_table(rows: list[dict]) -> list[str]:
    """The 5-seed rows of one plan before and after a change (names `SET-before-sN`, `SET-after-sN`): served at the
    first search, and the live figures of those served."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        name = row.get("name") or ""
        if "-before-s" in name or "-after-s" in name:
            groups.setdefault(name.rsplit("-s", 1)[0], []).append(row)
    if not groups:
        return []
    lines = ["", "## The same plan over seeds of the person, before and after a change", "",
             "Each set: `onboarding.py --plan gestures4 --strategy fast --budget 10m --seed N` for the person's seeds "
             "1-5 (`--name SET-sN`), the two sets of a change run side by side, seed by seed, each with the code "
             "named below on PYTHONPATH (from a folder outside the repository: `python -m` puts the working folder "
             "first on sys.path). " + " ".join(f"`{name}`: {text}." for name, text in SETS.items()
                                                 if name in groups) + " " + SETS_SHARED, "",
             "| set | journeys | served at the first search | held-out int8 of those served (windows) | "
             "live signs recognised, pooled | of the others: unknown / a wrong sign | live idle as rest/unknown, "
             "pooled | search s, mean | onboarding to served s, mean |", "|---|---|---|---|---|---|---|---|---|"]
    for name in sorted(groups):
        runs = groups[name]
        served = [r for r in runs if r.get("served")]
        signs = sum((r.get("live") or {}).get("signs_recognised", 0) for r in served)
        sign_windows = sum((r.get("live") or {}).get("sign_windows", 0) for r in served)
        idle = sum((r.get("live") or {}).get("idle_as_rest_or_unknown", 0) for r in served)
        idle_windows = sum((r.get("live") or {}).get("idle_windows", 0) for r in served)
        held = ", ".join(f"{r['accuracy']:.3f} ({r.get('test_windows', '?')})" for r in served if "accuracy" in r)
        lines.append(f"| {name} | {len(runs)} | {len(served)} of {len(runs)} | {held or '-'} | "
                     + (f"{signs}/{sign_windows} [{wilson(signs, sign_windows)[0]:.2f}, "
                        f"{wilson(signs, sign_windows)[1]:.2f}]" if sign_windows else "-") + " | "
                     + (f"{_total(served, 'signs_unknown')} / {_total(served, 'signs_wrong')}") + " | "
                     + (f"{idle}/{idle_windows} [{wilson(idle, idle_windows)[0]:.2f}, "
                        f"{wilson(idle, idle_windows)[1]:.2f}]" if idle_windows else "-") + " | "
                     + f"{_mean([r.get('search_seconds') for r in runs])} | "
                     + f"{_mean([dict(r.get('transitions') or []).get('SERVING') for r in served])} |")
    return lines


def _total(runs: list[dict], key: str) -> str:
    """A live count summed over `runs`, or "-" when a run was judged before the count existed."""
    values = [(r.get("live") or {}).get(key) for r in runs]
    return str(sum(values)) if values and all(isinstance(v, int) for v in values) else "-"


def _mean(values: list) -> str:
    known = [v for v in values if isinstance(v, (int, float))]
    return f"{sum(known) / len(known):.0f}" if known else "-"


def summary() -> None:
    """Rewrite onboarding.md from every journey's JSON."""
    rows = [json.loads(p.read_text()) for p in sorted(JOURNEYS.glob("*.json"))]
    lines = ["# Onboarding journeys through the service", "",
             "Each row: `python benchmarks/onboarding.py` (see its docstring) on this machine (2 cores, x86_64; "
             "what shared it: last paragraph), the real service and `tinynas simulate --person` (or `--machine`) on a "
             "pseudo-terminal, a realistic person (product defaults: median reaction 0.35 s, 10 % late starts "
             "of 0.7-1.1 s, 2 % wrong and 2 % missed signs, still rests with sensor noise). Phases in seconds "
             "of wall time from the onboarding request. Accuracy: the served int8 model on the session's "
             "held-out test windows (split by recording, as the service deploys); live: predictions while "
             "the person went on signing (4 s each) and resting (4 s) once served, with 95 % Wilson intervals "
             "over windows; live windows overlap (a 2 s window every 0.25 s), so the signs performed, not the "
             "windows, are the independent trials. Held-out test sets of 4 windows (gestures4 at 5 repetitions) "
             "say little: their interval spans about half the range.", "",
             "| journey | plan | strategy, budget | target | collection s | search s | deploy s | pauses | "
             "replugs / windows changed | held-out int8 (test windows) | live idle as rest/unknown | "
             "live signs recognised | served |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        live = r.get("live") or {}
        idle = (f"{live['idle_as_rest_or_unknown']}/{live['idle_windows']} "
                f"[{wilson(live['idle_as_rest_or_unknown'], live['idle_windows'])[0]:.2f}, "
                f"{wilson(live['idle_as_rest_or_unknown'], live['idle_windows'])[1]:.2f}]"
                if live.get("idle_windows") else "-")
        signs = (f"{live['signs_recognised']}/{live['sign_windows']} "
                 f"[{wilson(live['signs_recognised'], live['sign_windows'])[0]:.2f}, "
                 f"{wilson(live['signs_recognised'], live['sign_windows'])[1]:.2f}] "
                 f"({live.get('signs_performed', '?')} signs)"
                 if live.get("sign_windows") else "-")
        accuracy = f"{r['accuracy']:.3f} ({r.get('test_windows', '?')})" if "accuracy" in r else "-"
        lines.append(f"| {r['name']} | {r['plan']} | {r['strategy']}, {r['budget']} | {r['target']} | "
                     f"{_fmt(r.get('collection_seconds'))} | {_fmt(r.get('search_seconds'))} | "
                     f"{_fmt(r.get('deploy_seconds'))} | {r.get('pauses', '-')} | "
                     f"{(r.get('person') or {}).get('unplugs', 0)} / {r.get('changed_windows', '-')} | "
                     f"{accuracy} | {idle} | {signs} | "
                     f"{'yes' if r.get('served') else 'no: ' + _why_not(r)[:80]} |")
    lines += ["", "Journey logs (phase times, what the person or machine did, the service's and the simulator's "
              "lines): `benchmarks/results/journeys/NAME.log`; figures: `NAME.json`. `bearing4-cwru` is "
              "`benchmarks/plans/bearing4-cwru.toml` (each state held once for 4 s, as 0.5 s segments: the 0 hp "
              "normal recording holds 5.1 s), replayed by `tinynas simulate --machine` from the CWRU 0 hp files "
              "(bearingnas10 set, fan-end channel); its live check is left out (a replayed machine would repeat "
              "recorded samples). The replug journey streams without the live check (after a replug the device's "
              "counter and the service's forward-only timeline differ, which the check's alignment does not "
              "follow). What shared the machine: during gestures4-fast's collection, a few seconds of unit tests "
              "(test_boundary, ~20 s, and smaller ones); during gestures4-15reps' collection, a 30 s TensorFlow "
              "fit of a tiny model; during isl26-fast, from its eighth minute on (its search "
              "included), the whole test suite; during the others nothing but the developer's editor. isl26-5reps "
              "is the isl26 preset as it was (5 repetitions): refused at 0.31, which is why the preset now asks "
              "for 10. gestures4-fast, -paper and -fast-replugs ran the gestures4 preset as it was then (5 "
              "repetitions: 4 held-out windows); gestures4-15reps is the preset now (15), gestures4-10reps "
              "`benchmarks/plans/gestures4-10reps.toml` (10); its \"42 signs\" are 42 chunks of about 12 signs, "
              "which the merge of a sign's chunks (fixed since) did not join: a window across two unjoined chunks "
              "is judged in neither count (86 sign windows were judged, as in the others)."]
    lines += seeds_table(rows)
    (RESULTS / "onboarding.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def rejudge(name: str, work: str) -> int:
    """Judge journey `name`'s live predictions again from its working folder `work` (kept in /tmp), with the
    judge of today: the serving check's first sample is the one, among the predictions' ends, that reproduces the
    counts recorded then (exit 1 when none does: another journey's folder)."""
    path = JOURNEYS / f"{name}.json"
    result = json.loads(path.read_text())
    live, folder = result.get("live") or {}, Path(work)
    predictions, person = _lines(folder / "data" / "predictions.jsonl"), _lines(folder / "person.jsonl")
    window = int((result.get("model") or {}).get("input_length") or 0)
    recorded = {key: live.get(key) for key in ("idle_windows", "idle_as_rest_or_unknown", "sign_windows",
                                               "signs_recognised")}
    for since in sorted({p["end_sample"] for p in predictions}):
        judged = live_figures(predictions, person, window, since, margin=16)
        if {key: judged.get(key) for key in recorded} == recorded:
            result["live"] = judged
            path.write_text(json.dumps(result, indent=2) + "\n")
            print(f"{name}: {judged}")
            return 0
    print(f"{name}: no start in {work} reproduces its recorded counts {recorded}", file=sys.stderr)
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plan", default="gestures4")
    parser.add_argument("--source", default="isl:../shared/data/isl")
    parser.add_argument("--machine", action="store_true", help="a machine plan: `tinynas simulate --machine`")
    parser.add_argument("--strategy", default="fast")
    parser.add_argument("--budget", default="5m")
    parser.add_argument("--target", default="STM32C011F6P6")
    parser.add_argument("--workers", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unplug-every", type=float, default=0.0)
    parser.add_argument("--serve-seconds", type=float, default=90.0)
    parser.add_argument("--timeout", type=float, default=5400.0)
    parser.add_argument("--work", help="working folder (default: a new temporary one)")
    parser.add_argument("--name", help="journey name (default: PLAN-STRATEGY)")
    parser.add_argument("--summary", action="store_true", help="only rewrite onboarding.md from the journeys")
    parser.add_argument("--rejudge", nargs=2, metavar=("JOURNEY", "WORK"),
                        help="judge a finished journey's live predictions again from its working folder (the "
                             "serving check's start found as the one that reproduces its recorded counts)")
    args = parser.parse_args()
    if args.rejudge:
        return rejudge(*args.rejudge)
    if not args.summary:
        args.name = args.name or f"{Path(args.plan).stem}-{args.strategy}"
        result = run(args)
        print(json.dumps(result, indent=2))
    summary()
    return 0


if __name__ == "__main__":
    sys.exit(main())
