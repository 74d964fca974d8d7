#!/usr/bin/env bash
# Can every run-time dependency of tinynas be installed on a Raspberry Pi 4 from binary wheels?
#
#     bash benchmarks/pi/resolve.sh            # from the repository root; needs PyPI, ~15 s
#
# Asks pip to resolve tinynas (and its optuna extra) for linux aarch64 / CPython 3.11 with binary
# wheels only, without installing anything (--dry-run; pip reads wheel metadata, PEP 658), and
# fails if any dependency has no aarch64 (or pure-Python) wheel. pip matches platform tags exactly,
# so every manylinux tag a Raspberry Pi OS bookworm (glibc 2.36) accepts is listed. Environment
# markers are evaluated by pip on this machine, not for the Pi; the emulated run
# (benchmarks/pi/emulated_run.sh) resolves again inside a real arm64 Debian.
# Writes benchmarks/results/pi-wheels.md and .json. Not run in CI (needs the network).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
platforms=(--platform linux_aarch64 --platform manylinux2014_aarch64)
for minor in $(seq 17 36); do platforms+=(--platform "manylinux_2_${minor}_aarch64"); done
for extra in "" "[optuna]"; do
    name=${extra:-base}
    name=${name//[\[\]]/}
    python -m pip install --dry-run --ignore-installed --only-binary=:all: --no-cache-dir \
        --python-version 3.11 --implementation cp --abi cp311 "${platforms[@]}" \
        --target "$work/target" --report "$work/$name.json" --quiet ".$extra" 2> "$work/$name.log" || {
        echo "resolution failed for tinynas$extra on linux aarch64 (binary wheels only):" >&2
        grep -E "ERROR|No matching" "$work/$name.log" >&2 || tail -5 "$work/$name.log" >&2
        exit 1
    }
done
python - "$work" <<'PY'
import json, os, platform, subprocess, sys, time
from pathlib import Path

work = Path(sys.argv[1])
results = Path("benchmarks/results")
rows, bad = {}, []
for name in ("base", "optuna"):
    report = json.loads((work / f"{name}.json").read_text())
    for item in report["install"]:
        package = item["metadata"]["name"]
        if package == "tinynas":
            continue
        url = item["download_info"]["url"]
        wheel = url.rsplit("/", 1)[-1]
        tags = wheel[:-4].split("-")[-1] if wheel.endswith(".whl") else ""
        kind = "aarch64" if "aarch64" in tags else "pure Python" if tags == "any" else "NOT A PI WHEEL"
        if kind == "NOT A PI WHEEL":
            bad.append(f"{package}: {wheel}")
        rows.setdefault(package, (item["metadata"]["version"], wheel, kind, set()))[3].add(name)
pip_version = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True).stdout.split()[1]
lines = ["# Raspberry Pi 4 wheels: tinynas's run-time dependencies for linux aarch64, CPython 3.11", "",
         "Command: `bash benchmarks/pi/resolve.sh` (pip " + pip_version + " on " + platform.machine() + ", "
         + time.strftime("%Y-%m-%d") + "). Binary wheels only; platform tags linux_aarch64, manylinux2014_aarch64 "
         "and manylinux_2_17 ... manylinux_2_36_aarch64 (Raspberry Pi OS bookworm has glibc 2.36).", "",
         f"Every one of the {len(rows)} packages has a wheel the Pi can install: "
         + ("yes" if not bad else "NO: " + "; ".join(bad)) + ".", "",
         "| package | version | wheel | kind | needed by |", "|---|---|---|---|---|"]
for package in sorted(rows, key=str.lower):
    version, wheel, kind, needed = rows[package]
    lines.append(f"| {package} | {version} | `{wheel}` | {kind} | "
                 f"{'tinynas' if 'base' in needed else 'tinynas[optuna]'} |")
lines += ["", "Not resolved for the Pi on purpose: the `micro` and `test` extras' tflite-micro (x86_64 wheels "
          "only; it only verifies RAM figures, and tinynas works without it)."]
results.mkdir(exist_ok=True)
(results / "pi-wheels.md").write_text("\n".join(lines) + "\n")
(results / "pi-wheels.json").write_text(json.dumps(
    {package: {"version": v, "wheel": w, "kind": k, "needed_by": sorted(n)} for package, (v, w, k, n) in
     sorted(rows.items())}, indent=2) + "\n")
print("\n".join(lines))
sys.exit(1 if bad else 0)
PY
