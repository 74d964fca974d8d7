"""Live, as the person lives with it: the onboarding journey, then the armband worn again the next day (issue 67).

    nice python benchmarks/live.py --seeds 1,2,3,4,5 --set new
    nice python benchmarks/live.py --seeds 1,2,3,4,5 --set old --tree /tmp/tinynas-old   # the rules before
    python benchmarks/live.py --summary

Per seed of the simulated person (the product's realistic defaults: median reaction 0.35 s, 10 % late starts of
0.7-1.1 s, 2 % wrong and 2 % missed signs, sensor noise): the real service and `tinynas simulate --person` on a
pseudo-terminal, gestures4 (15 repetitions) onboarded from ISL's June recordings; served, the person signs and rests
(4 s each) for `--serve-seconds`, and every live prediction is judged against what was played (`judge`). Then day
2: the simulator comes back with the re-worn armband's recordings (ISL's third session, development copy: the
same person weeks later), the person signs again with the day-1 model (day 2, before), asks for a re-wear
(`tinynas onboard --recalibrate`: 2 repetitions per class), and signs again with whatever is then served (day 2,
after); what the page says of the served model is kept. `--tree` runs the service and the simulator from another
checkout (PYTHONPATH): the rules before this issue.

Judged per window (a 2 s window every 0.25 s): a **sign window** when at least half of it (or of the sign) is one
played sign, right when what was shown (the smoothed answer) names it; an **idle window** when it touches no sign,
right when shown as rest or unknown; per **sign**: recognised when most of its sign windows show its name; the
**latency** from its first sample to the first window showing its name. Signs are the independent trials (their
windows overlap): intervals are counted in signs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from onboarding import _free_port, _lines, _page, _read_json, played_signs, wilson  # noqa: E402

RESULTS = Path(__file__).parent / "results"
LIVE = RESULTS / "live"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DAY1, DAY2 = f"isl:{SHARED / 'isl'}", f"isl:{SHARED / 'isl_session3_dev'}"
SIGN_SHARE = 0.5
MARGIN = 16
"""Samples: a played sign's chunks within this of each other are one sign (device indices are exact to a frame)."""


def judge(predictions: list[dict], person: list[dict], window: int, since: int, rate: float) -> dict:
    """What the person saw while signing after sample `since`: per window, per sign, latency (see the docstring);
    for the shown (smoothed) answers and, beside them, the raw ones."""
    # Signs the predictions cover whole: one still being made when serving was last looked at is not judged.
    last = max((int(p["end_sample"]) for p in predictions), default=0)
    signs = [s for s in played_signs(person, since, MARGIN) if s[0] != "rest" and s[1] + s[2] <= last]
    if not signs:
        return {}
    begin, end = signs[0][1] - 2 * window, signs[-1][1] + signs[-1][2] + window
    figures: dict = {"signs": len(signs), "since": since, "window": window}
    for key in ("smoothed", "label"):
        sign_windows = right = unknown = idle = idle_right = 0
        per_sign: list[list[int]] = [[0, 0] for _ in signs]
        latencies: list[float] = []
        for prediction in predictions:
            last = int(prediction["end_sample"])
            first = last - window
            if first < max(begin, since) or last > end:
                continue
            shown = prediction.get(key, "")
            overlaps = [max(0, min(last, start + count) - max(first, start)) for _, start, count in signs]
            best = max(range(len(signs)), key=lambda i: overlaps[i])
            if overlaps[best] >= SIGN_SHARE * min(window, signs[best][2]):
                sign_windows += 1
                right += shown == signs[best][0]
                unknown += shown == "unknown"
                per_sign[best][0] += 1
                per_sign[best][1] += shown == signs[best][0]
            elif not any(max(0, min(last, start + count + MARGIN) - max(first, start - MARGIN)) for _, start, count
                         in signs):
                idle += 1
                idle_right += shown in ("rest", "unknown")
        for number, (label, start, count) in enumerate(signs):
            shown_at = [int(p["end_sample"]) for p in predictions if start <= int(p["end_sample"]) <= start + count +
                        window and p.get(key) == label]
            if per_sign[number][0] and per_sign[number][1] * 2 > per_sign[number][0] and shown_at:
                latencies.append((min(shown_at) - start) / rate)
        recognised = sum(1 for windows, hits in per_sign if windows and hits * 2 > windows)
        figures[key] = {"sign_windows": sign_windows, "sign_right": right, "unknown": unknown, "idle_windows": idle,
                        "idle_right": idle_right, "recognised": recognised,
                        "per_class": _per_class(signs, per_sign), "latencies": [round(v, 3) for v in latencies]}
    return figures


def _per_class(signs, per_sign) -> dict:
    found: dict[str, list[int]] = {}
    for (label, _, _), (windows, hits) in zip(signs, per_sign):
        counts = found.setdefault(label, [0, 0])
        counts[0] += 1
        counts[1] += bool(windows and hits * 2 > windows)
    return {label: {"signs": total, "recognised": hits} for label, (total, hits) in found.items()}


def judge_stretch(data: Path, person_log: Path, asked: float, ended: float, rate: float, window: int) -> dict:
    """The predictions made between `asked` and `ended` (wall time) judged against what the person played.

    The simulator's device counts its samples from 0 at each start, and stalls while the service does not read
    (a search); the service counts what it received, across reconnections. While serving both run with wall time,
    so the offset between them over this stretch is the median of (service sample - rate x time) over its
    predictions less that of (device sample - rate x time) over the person's notes (a prediction is made an
    inference after its last sample: a few samples late)."""
    predictions = [p for p in _lines(data / "predictions.jsonl") if asked <= float(p["time"]) <= ended]
    # A sign begun up to 8 s before (one sign-and-rest turn) may still fill the first windows judged.
    person = [e for e in _lines(person_log) if "played" in e and e.get("device_first") is not None
              and asked - 8.0 <= float(e["time"]) <= ended]
    during = [e for e in person if float(e["time"]) >= asked]
    if not predictions or not during:
        return {}
    device = [int(e["device_first"]) - rate * float(e["time"]) for e in during]
    if len(device) > 1 and statistics.pstdev(device) > rate:  # the device's count is not one line over the stretch
        return {"unaligned": round(statistics.pstdev(device))}
    offset = round(statistics.median(int(p["end_sample"]) - rate * float(p["time"]) for p in predictions)
                   - statistics.median(device))
    shifted = [dict(e, device_first=int(e["device_first"]) + offset) for e in person]
    figures = judge(predictions, shifted, window, min(int(p["end_sample"]) for p in predictions), rate)
    return dict(figures, offset=offset, asked=round(asked, 3), ended=round(ended, 3)) if figures else {}


def rejudge(work: Path, serve_seconds: float, rate: float = 200.0, window: int = 400) -> dict[str, dict]:
    """A finished seed's three stretches judged again from its folder (the judge changed since it ran): each
    stretch's wall-clock bounds found from the predictions (day 1 ends where the day-2 simulator started; day 2,
    before, begins with the first prediction after it; day 2, after, ends with the last), `serve_seconds` long."""
    times = sorted(float(p["time"]) for p in _lines(work / "data" / "predictions.jsonl"))
    day2_log = work / "person-day2.jsonl"
    notes = _lines(day2_log)
    if not times:
        return {}
    day2 = min((float(e["time"]) for e in notes), default=float("inf"))
    day1_end = max((t for t in times if t < day2), default=None)
    after_day2 = [t for t in times if t >= day2]
    found: dict[str, dict] = {}
    if day1_end is not None:
        found["day1"] = judge_stretch(work / "data", work / "person-day1.jsonl", day1_end - serve_seconds, day1_end,
                                      rate, window)
    if after_day2:
        found["day2_before"] = judge_stretch(work / "data", day2_log, after_day2[0], after_day2[0] + serve_seconds,
                                             rate, window)
        found["day2_after"] = judge_stretch(work / "data", day2_log, after_day2[-1] - serve_seconds, after_day2[-1],
                                            rate, window)
    return found


class Journey:
    """One seed: a service and a simulator (restarted for day 2), from `tree`'s code."""

    def __init__(self, args: argparse.Namespace, seed: int) -> None:
        self.args, self.seed = args, seed
        self.work = Path(args.work) / f"{args.set}-s{seed}"
        self.work.mkdir(parents=True, exist_ok=True)
        self.data, self.port, self.http = self.work / "data", self.work / "ttyLIVE", _free_port()
        self.config = self.work / "tinynas.toml"
        self.config.write_text(f'port = "{self.port}"\ndata_dir = "{self.data}"\ntarget = "{args.target}"\n'
                               f'budget = "{args.budget}"\nstrategy = "fast"\nplan = "gestures4"\n'
                               f'http_port = {self.http}\nworkers = "auto"\n')
        # The service and the simulator run from the tree named, else from this checkout: never from whatever
        # tinynas the interpreter happens to have installed (an editable install of another clone).
        tree = Path(args.tree) if args.tree else Path(__file__).resolve().parent.parent
        self.env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
        self.cwd = Path(args.tree).resolve() if args.tree else Path(tempfile.gettempdir())
        self.log = open(self.work / "service.log", "a")
        self.service: subprocess.Popen | None = None
        self.simulator: subprocess.Popen | None = None

    def tinynas(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "tinynas.cli", *args]

    def start_simulator(self, source: str, seed: int, log: Path) -> None:
        self.simulator = subprocess.Popen(
            self.tinynas("simulate", "--person", "--serving-check", "--source", source, "--port", str(self.port),
                         "--follow", f"http://127.0.0.1:{self.http}/status.json", "--config", str(self.config),
                         "--log", str(log), "--seed", str(seed)),
            stdout=self.log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd)

    def stop_simulator(self) -> None:
        if self.simulator is not None:
            self.simulator.terminate()
            try:
                self.simulator.wait(30)
            except subprocess.TimeoutExpired:
                self.simulator.kill()

    def state(self) -> dict:
        return _read_json(self.data / "state.json")

    def wait(self, what: str, done, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"seed {self.seed}: {what} did not happen within {timeout:.0f} s")
            time.sleep(1.0)

    def serve_and_judge(self, person_log: Path) -> dict:
        """The person signs and rests for --serve-seconds with what is served; the live predictions judged."""
        asked = time.time()
        time.sleep(self.args.serve_seconds)
        deployed = self.state().get("deployed") or {}
        status = _read_json(self.data / "status.json")
        rate = float((status.get("device") or {}).get("sample_rate_hz") or 200.0)
        window = int(round(float((deployed.get("plan") or {}).get("window_seconds", 2.0)) * rate))
        return judge_stretch(self.data, person_log, asked, time.time(), rate, window)

    def run(self) -> dict:
        args = self.args
        result: dict = {"set": args.set, "seed": self.seed, "tree": args.tree or "this checkout"}
        day1_log, day2_log = self.work / "person-day1.jsonl", self.work / "person-day2.jsonl"
        self.start_simulator(DAY1, self.seed, day1_log)
        self.service = subprocess.Popen(self.tinynas("service", "run", "--config", str(self.config)),
                                        stdout=self.log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd)
        try:
            self.wait("the service coming up", lambda: _read_json(self.data / "status.json").get("state") == "IDLE",
                      300)
            subprocess.run(self.tinynas("onboard", "--user", "live", "--plan", "gestures4", "--config",
                                        str(self.config)), check=True, stdout=self.log, stderr=subprocess.STDOUT,
                           env=self.env, cwd=self.cwd)
            started = time.monotonic()
            self.wait("alice served", lambda: self.state().get("state") == "SERVING" or
                      (self.state().get("state") == "IDLE" and time.monotonic() - started > 120 and
                       (self.state().get("error") or self.state().get("gate"))), args.timeout)
            result["day1_served"] = self.state().get("state") == "SERVING"
            result["onboarding_seconds"] = round(time.monotonic() - started)
            if not result["day1_served"]:
                result["why_not"] = self.state().get("error") or (self.state().get("gate") or {}).get("text", "")
                return result
            deployed = self.state()["deployed"]
            result["day1_gate"] = deployed.get("held_out")
            result["day1_serving"] = {key: value for key, value in (deployed.get("serving") or {}).items()
                                      if key != "stream"}
            result["day1"] = self.serve_and_judge(day1_log)
            # Day 2: the armband put on again (ISL's third session), the same person.
            self.stop_simulator()
            self.start_simulator(DAY2, self.seed + 1000, day2_log)
            self.wait("the device back", lambda: (_read_json(self.data / "status.json").get("device") or {})
                      .get("connected"), 120)
            result["day2_before"] = self.serve_and_judge(day2_log)
            asked = time.time()
            subprocess.run(self.tinynas("onboard", "--user", "live", "--recalibrate", "--config", str(self.config)),
                           check=True, stdout=self.log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd)

            def ended() -> bool:
                flow = self.state().get("rewear") or {}
                return flow.get("started", 0) >= asked - 5 and flow.get("phase") in ("accepted", "rejected", "failed",
                                                                                     "cancelled") \
                    and self.state().get("state") == "SERVING"

            self.wait("the re-wear", ended, args.timeout)
            flow = self.state().get("rewear") or {}
            result["rewear"] = {"phase": flow.get("phase"), "text": flow.get("text"),
                                "failing_today": _failing_today(flow.get("figures") or {})}
            result["day2_after"] = self.serve_and_judge(day2_log)
            page = _page(self.http)
            result["page_model"] = page.get("model") or {}
            result["page_deployed"] = {key: (page.get("deployed") or {}).get(key) for key in ("held_out", "today")}
        finally:
            self.stop_simulator()
            if self.service is not None:
                self.service.terminate()
                try:
                    self.service.wait(60)
                except subprocess.TimeoutExpired:
                    self.service.kill()
            self.log.close()
        return result


def _failing_today(figures: dict) -> list | None:
    """The classes the old model failed today (a checkout before the re-wear's `stream` figures kept them among
    `paired`)."""
    return ((figures.get("stream") or {}).get("failing_today") or (figures.get("paired") or {}).get("failing_today"))


def _share(figures: dict | None, key: str, hits: str, total: str) -> tuple[int, int]:
    part = (figures or {}).get(key) or {}
    return int(part.get(hits, 0)), int(part.get(total, 0))


def summary(shared: str = "not recorded") -> None:
    rows = [json.loads(path.read_text()) for path in sorted(LIVE.glob("*.json"))]
    lines = ["# Live, as the person lives with it (issue 67)", "",
             "Each row: `python benchmarks/live.py` (see its docstring), one seed of the person. `old`: the rules "
             "before issue 67 (the service and simulator of that checkout: the unknown threshold and the gate on the "
             "onset-cut windows, majority smoothing over 3, no offsets in training, windows cut at GO kept); `new`: "
             "this checkout. Shown answers (what the person sees). Per window: sign windows right and unknown, idle "
             "windows right (rest or unknown); per sign: recognised (most of its windows show it); latency: median "
             "seconds from a sign's first sample to the first window showing it. Intervals (95 %, Wilson) counted in "
             "signs for signs; windows overlap (a 2 s window every 0.25 s), their shares carry no interval. "
             f"What shared the machine: {shared}.", ""]
    for day in ("day1", "day2_before", "day2_after"):
        lines += [f"## {day.replace('_', ', ')}", "",
                  "| set | seed | signs recognised | sign windows right | unknown | idle windows right | latency s "
                  "(median) | classes failing |", "|---|---:|---|---|---|---|---:|---|"]
        for set_name in ("old", "new"):
            pooled = {"recognised": 0, "signs": 0, "right": 0, "windows": 0, "unknown": 0, "idle": 0, "idle_w": 0}
            for row in [r for r in rows if r["set"] == set_name]:
                figures = row.get(day) or {}
                shown = figures.get("smoothed") or {}
                if not shown:
                    why = (f"not judged: the device's sample count is not linear in time over the stretch (spread "
                           f"{figures['unaligned']:,} samples)" if figures.get("unaligned") else
                           row.get("why_not", "not served")[:60])
                    lines.append(f"| {set_name} | {row['seed']} | - | - | - | - | - | {why} |")
                    continue
                signs, recognised = figures.get("signs", 0), shown["recognised"]
                failing = [f"{name} {c['recognised']}/{c['signs']}" for name, c in shown["per_class"].items()
                           if c["signs"] and c["recognised"] / c["signs"] < 0.9]
                low, high = wilson(recognised, signs)
                lines.append(f"| {set_name} | {row['seed']} | {recognised}/{signs} [{low:.2f}, {high:.2f}] | "
                             f"{shown['sign_right']}/{shown['sign_windows']} | "
                             f"{shown['unknown'] / max(shown['sign_windows'], 1):.1%} | "
                             f"{shown['idle_right']}/{shown['idle_windows']} | "
                             + (f"{statistics.median(shown['latencies']):.2f}" if shown["latencies"] else "-")
                             + f" | {', '.join(failing) or 'none'} |")
                pooled["recognised"] += recognised
                pooled["signs"] += signs
                pooled["right"] += shown["sign_right"]
                pooled["windows"] += shown["sign_windows"]
                pooled["unknown"] += shown["unknown"]
                pooled["idle"] += shown["idle_right"]
                pooled["idle_w"] += shown["idle_windows"]
            if pooled["signs"]:
                low, high = wilson(pooled["recognised"], pooled["signs"])
                lines.append(f"| **{set_name}, pooled** | | {pooled['recognised']}/{pooled['signs']} "
                             f"[{low:.2f}, {high:.2f}] | {pooled['right'] / max(pooled['windows'], 1):.3f} | "
                             f"{pooled['unknown'] / max(pooled['windows'], 1):.1%} | "
                             f"{pooled['idle'] / max(pooled['idle_w'], 1):.3f} | | |")
        lines.append("")
    lines += ["## The served model's time on the chip, as the page said it", "", "| set | seed | served | page |",
              "|---|---:|---|---|"]
    for row in rows:
        model = row.get("page_model") or {}
        lines.append(f"| {row['set']} | {row['seed']} | {model.get('architecture') or model.get('name') or '-'} | "
                     f"{(model.get('time') or {}).get('words', 'no time line')} |")
    lines += ["", "## The re-wear and what the page said", "", "| set | seed | re-wear | classes the old model "
              "failed today | the page after it |", "|---|---:|---|---|---|"]
    for row in rows:
        rewear = row.get("rewear") or {}
        model = row.get("page_deployed") or {}
        today = model.get("today") or {}
        failing = ", ".join(today.get("failing") or [])
        held = model.get("held_out") or {}
        said = (f"today: {today.get('recognised')}/{today.get('signs')} signs, fails {failing}" if today else
                f"{held.get('hits')}/{held.get('windows')}, {held.get('measure', '')}" if held else "-")
        lines.append(f"| {row['set']} | {row['seed']} | {rewear.get('phase', '-')} | "
                     f"{', '.join(rewear.get('failing_today') or []) or '-'} | {said} |")
    (RESULTS / "live.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--set", default="new", help="old or new: what the rows are named")
    parser.add_argument("--tree", help="run the service and simulator from this checkout (PYTHONPATH)")
    parser.add_argument("--target", default="LSM6DSO16IS", help="the armband's chip (issue 66's: a 10 MHz ISPU)")
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--serve-seconds", type=float, default=120.0)
    parser.add_argument("--timeout", type=float, default=5400.0)
    parser.add_argument("--work", default="/tmp/tinynas-live")
    parser.add_argument("--summary", action="store_true")
    parser.add_argument("--shared", default="not recorded", help="what shared the machine (for the results)")
    parser.add_argument("--rejudge", action="store_true",
                        help="judge the finished seeds in --work again (the judge changed), then --summary")
    args = parser.parse_args()
    if args.rejudge:
        for path in sorted(LIVE.glob("*.json")):
            row = json.loads(path.read_text())
            folder = Path(args.work) / f"{row['set']}-s{row['seed']}"
            if row.get("day1_served") and folder.is_dir():
                row.update(rejudge(folder, args.serve_seconds))
                path.write_text(json.dumps(row, indent=1) + "\n")
    if args.summary or args.rejudge:
        summary(args.shared)
        return 0
    LIVE.mkdir(parents=True, exist_ok=True)
    for seed in [int(s) for s in args.seeds.split(",")]:
        result = Journey(args, seed).run()
        (LIVE / f"{args.set}-s{seed}.json").write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps({key: result.get(key) for key in ("set", "seed", "day1_served")}), flush=True)
    summary()
    return 0


if __name__ == "__main__":
    sys.exit(main())
