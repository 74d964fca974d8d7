"""Collect and tabulate the TFLM footprint firmwares that footprint.sh built and ran.

    python footprint_report.py collect BUILD CORE     -> BUILD/CORE/footprint.json
    python footprint_report.py tables BUILD [JSON]    -> markdown tables on stdout (+ combined JSON)

Per firmware (BUILD/CORE/BUILD_TYPE/fw/VARIANT-model<i>.elf):
- section sizes from `arm-none-eabi-readelf -S` (allocated sections only): flash = PROGBITS placed in
  flash (code, constants, .init_array, ...) plus the load image of RAM PROGBITS (.data, .tdata); static
  RAM = every allocated RAM section (.data, .tdata, .bss, .tbss_space) except picolibc.ld's `.stack`,
  which only reserves a minimum for the stack (the stack is measured at run time instead);
- the same bytes split by where they come from, from the link map: libtflm.a (by TFLM part), picolibc's
  libc, libgcc, the app object (footprint.o), the model, crt0, fill;
- the symbols in RAM (`readelf -s`), to split static RAM into the interpreter object, the resolver object
  and the rest;
- what the firmware printed on QEMU (stack peaks, arena_used_bytes, output bytes, status).
Each TFLM firmware is compared with the baseline firmware of the same model (same arena, same model
array, no TFLM): delta = firmware - baseline.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

RAM_BASE = 0x20000000
VARIANTS = ("ops3", "ops4", "ops3-pnew", "ops4-pnew")
VARIANT_TITLE = {"ops3": "CONV_2D, MEAN, FULLY_CONNECTED; function-static resolver and interpreter",
                 "ops4": "CONV_2D, MAX_POOL_2D, MEAN, FULLY_CONNECTED; function-static resolver and interpreter",
                 "ops3-pnew": "3 ops; resolver and interpreter placement-new'd into static buffers",
                 "ops4-pnew": "4 ops; resolver and interpreter placement-new'd into static buffers"}
CORE_TITLE = {"m0": "Cortex-M0 (micro:bit)", "m4": "Cortex-M4F (mps2-an386)"}


def sections(elf: Path) -> dict[str, dict]:
    """Allocated sections: name -> {index, size, addr, nobits, tls}."""
    out = subprocess.run(["arm-none-eabi-readelf", "-S", "-W", str(elf)], check=True, capture_output=True,
                         text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*(\d+)\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\s+(\S*)",
                     line)
        if not m or "A" not in m[6]:
            continue
        found[m[2]] = {"index": int(m[1]), "size": int(m[5], 16), "addr": int(m[4], 16),
                       "nobits": m[3] == "NOBITS", "tls": "T" in m[6]}
    return found


def groups(secs: dict[str, dict]) -> dict[str, int]:
    """flash: code + constants + the .data/.tdata load image; ram: static RAM, from the start of RAM to
    the end of .bss (so alignment gaps count), of which ram_data is initialized (.data, .tdata).

    picolibc.ld's .stack only reserves a minimum for the stack, and .tbss is laid out again as
    .tbss_space (its addresses), so neither is added."""
    flash = data = 0
    ram_end = RAM_BASE
    for name, s in secs.items():
        if name == ".stack" or (s["tls"] and s["nobits"]):
            continue
        if s["addr"] >= RAM_BASE:
            ram_end = max(ram_end, s["addr"] + s["size"])
            if not s["nobits"]:
                flash += s["size"]  # load image
                data += s["size"]
        elif not s["nobits"]:
            flash += s["size"]
    ram = ram_end - RAM_BASE
    return {"flash": flash, "ram": ram, "ram_data": data, "ram_bss": ram - data}


def origin(path: str) -> str:
    """Who an input section comes from."""
    if "libtflm.a(" in path:
        member = path.split("libtflm.a(")[1].rstrip(")")
        if member.startswith("tensorflow_lite_micro_kernels_"):
            return "tflm:kernels"
        if member.startswith("tensorflow_lite_micro_"):
            return "tflm:framework"
        return "tflm:tflite_shared"  # tensorflow/lite/core, kernels/internal, schema: op parsers, quantization
    for lib in ("libc.a", "libm.a", "libgcc.a", "libsemihost.a"):
        if lib + "(" in path:
            return lib.split(".")[0]
    name = path.rsplit("/", 1)[-1]
    if name.startswith("crt0"):
        return "crt0"
    if name.startswith("model"):
        return "model"
    if name.endswith(".o"):
        return "app"
    return "other"


def map_split(map_file: Path, secs: dict[str, dict]) -> dict[str, dict[str, int]]:
    """Bytes per origin in flash and in RAM, from the link map's input sections (and *fill*)."""
    split: dict[str, dict[str, int]] = {"flash": defaultdict(int), "ram": defaultdict(int)}
    lines = map_file.read_text().splitlines()
    try:
        start = lines.index("Linker script and memory map")
    except ValueError:
        raise SystemExit(f"{map_file}: no memory map") from None
    current = None
    pending = None
    for line in lines[start + 1:]:
        out = re.match(r"^(\.\S+|\S+)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+))?", line)
        if out and not line.startswith(" "):
            current = out[1] if out[1] in secs else None
            pending = None
            continue
        if current is None or current in (".stack", ".tbss_space"):
            continue
        m = re.match(r"^ (\*fill\*|\S+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)(?:\s+(.*))?$", line)
        if m is None and pending is not None:
            m2 = re.match(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$", line)
            if m2:
                m = (None, pending, m2[1], m2[2], m2[3])
            pending = None
        elif m is None:
            single = re.match(r"^ (\.\S+)$", line)
            pending = single[1] if single else None
            continue
        if m is None:
            continue
        name, size, path = m[1], int(m[3], 16), (m[4] or "")
        if size == 0:
            continue
        who = "fill" if name == "*fill*" else origin(path)
        s = secs[current]
        if s["addr"] >= RAM_BASE:
            split["ram"][who] += size
            if not s["nobits"]:
                split["flash"][who] += size
        elif not s["nobits"]:
            split["flash"][who] += size
    return {k: dict(v) for k, v in split.items()}


def ram_symbols(elf: Path, secs: dict[str, dict]) -> dict[str, int]:
    """Objects in RAM sections, TLS ones included (demangled name -> size), from `readelf -s`."""
    ram_index = {s["index"] for s in secs.values() if s["addr"] >= RAM_BASE or s["tls"]}
    out = subprocess.run(["arm-none-eabi-readelf", "-s", "-W", "--demangle", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    found: dict[str, int] = defaultdict(int)
    for line in out.splitlines():
        m = re.match(r"\s*\d+:\s+[0-9a-f]+\s+(\d+)\s+(OBJECT|TLS)\s+\S+\s+\S+\s+(\d+)\s+(.+)$", line)
        if m and int(m[3]) in ram_index and int(m[1]) > 0:
            found[m[4]] += int(m[1])
    return dict(found)


def printed(log: Path) -> dict:
    values: dict = {"out": []}
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"^(\w+)=(-?\d+)$", line.strip())
        if m:
            if m[1] == "out":
                values["out"].append(int(m[2]))
            else:
                values[m[1]] = int(m[2])
    values["ended"] = "end" in log.read_text(errors="replace").split()
    return values


def collect(build: Path, core: str) -> None:
    models = {m["index"]: m for m in json.loads((build / "models" / "models.json").read_text())}
    result = {"core": core, "build_types": {}}
    for type_dir in sorted(p for p in (build / core).iterdir() if (p / "fw").is_dir()):
        fws = {}
        for elf in sorted((type_dir / "fw").glob("*.elf")):
            variant, model = elf.stem.rsplit("-model", 1)
            secs = sections(elf)
            fws[(variant, int(model))] = {
                "sections": {k: v["size"] for k, v in secs.items()},
                "groups": groups(secs),
                "split": map_split(elf.with_suffix(".map"), secs),
                "ram_symbols": ram_symbols(elf, secs),
                "run": printed(elf.with_suffix(".log")),
            }
        runs = []
        for (variant, index), fw in sorted(fws.items()):
            base = fws[("baseline", index)]
            entry = {"variant": variant, "model": models[index]["name"], "model_index": index,
                     "input": models[index]["input"], "classes": models[index]["classes"], **fw}
            if variant != "baseline":
                entry["delta"] = {k: fw["groups"][k] - base["groups"][k] for k in fw["groups"]}
                entry["delta_split"] = {
                    where: {who: fw["split"][where].get(who, 0) - base["split"][where].get(who, 0)
                            for who in sorted(set(fw["split"][where]) | set(base["split"][where]))
                            if fw["split"][where].get(who, 0) != base["split"][where].get(who, 0)}
                    for where in ("flash", "ram")}
                added = {}
                for name, size in fw["ram_symbols"].items():
                    if size != base["ram_symbols"].get(name, 0):
                        added[name] = size - base["ram_symbols"].get(name, 0)
                entry["delta_ram_symbols"] = added
                entry["output_equals_wheel"] = fw["run"]["out"] == models[index]["wheel_output"]
                entry["ilp32_estimate"] = models[index]["ilp32"]
            runs.append(entry)
        result["build_types"][type_dir.name] = {
            "flags": (type_dir / "flags.txt").read_text().strip(), "firmwares": runs}
    path = build / core / "footprint.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


def classify_ram(total: int, symbols: dict[str, int]) -> dict:
    """Split the added static RAM: the interpreter object, the resolver object, the rest (with names)."""
    interpreter = resolver = 0
    names = {}
    for name, size in symbols.items():
        if "guard variable" not in name and (name.endswith("::interpreter") or "g_interpreter_buffer" in name):
            interpreter += size
        elif "guard variable" not in name and (name.endswith("::resolver") or "g_resolver_buffer" in name):
            resolver += size
        else:
            names[name] = size
    other = total - interpreter - resolver
    padding = other - sum(names.values())
    if padding:
        names["(alignment padding)"] = padding
    return {"interpreter_object": interpreter, "resolver_object": resolver, "other": other, "other_symbols": names}


FLASH_PARTS = (("tflm:framework", "framework"), ("tflm:kernels", "kernels"),
               ("tflm:tflite_shared", "tflite shared"), ("libc", "libc"), ("libgcc", "libgcc"), ("app", "app"))


def flash_parts(fw: dict) -> dict[str, int]:
    """The added code flash by origin (link map). The map lists mergeable string sections before the linker
    merges them, and fill moves; `rest` (total minus the listed parts) absorbs both, with crt0/semihost."""
    sp = fw["delta_split"]["flash"]
    parts = {label: sp.get(key, 0) for key, label in FLASH_PARTS}
    parts["rest"] = fw["delta"]["flash"] - sum(parts.values())
    return parts


def span(values) -> str:
    values = sorted(set(values))
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def tables(build: Path, json_out: Path | None) -> None:
    cores = {}
    for core in ("m0", "m4"):
        path = build / core / "footprint.json"
        if path.exists():
            cores[core] = json.loads(path.read_text())
    summary, errors = [], []
    parts_header = " / ".join(label for _, label in FLASH_PARTS)
    print("| core | build | op set | static RAM | interpreter + resolver + other | stack AllocateTensors | "
          f"stack Invoke | stack max | code flash | flash: {parts_header} / rest |")
    print("|---|---|---|---:|---|---:|---:|---:|---:|---|")
    for core, data in cores.items():
        for build_type, bt in data["build_types"].items():
            for f in bt["firmwares"]:
                if f["variant"] == "ops4-small":
                    errors.append({"core": core, "build_type": build_type, "model": f["model"],
                                   "status": f["run"].get("status"), "qemu_status": f["run"].get("qemu_status"),
                                   "stack_allocate_failing": f["run"].get("stack_allocate")})
            for variant in VARIANTS:
                fws = [f for f in bt["firmwares"] if f["variant"] == variant]
                if not fws:
                    continue
                f0 = fws[0]
                ram = classify_ram(f0["delta"]["ram"], f0["delta_ram_symbols"])
                alloc = max(f["run"].get("stack_allocate", -1) for f in fws)
                invoke = max(f["run"].get("stack_invoke", -1) for f in fws)
                setup = max(f["run"].get("stack_setup", -1) for f in fws)
                parts = flash_parts(f0)
                ok = all(f["run"].get("status") == 0 and f["run"].get("qemu_status") == 0
                         and f["output_equals_wheel"] for f in fws)
                print(f"| {core} | {build_type} | {variant} | {span(f['delta']['ram'] for f in fws)} | "
                      f"{ram['interpreter_object']} + {ram['resolver_object']} + {ram['other']} | {alloc} | "
                      f"{invoke} | {max(alloc, invoke)} | {span(f['delta']['flash'] for f in fws)} | "
                      f"{' / '.join(str(v) for v in parts.values())} |"
                      + ("" if ok else " **a run failed or its output differs from the wheel's** |"))
                summary.append({
                    "core": core, "build_type": build_type, "variant": variant, "ops": VARIANT_TITLE[variant],
                    "flags": bt["flags"], "models": [f["model"] for f in fws],
                    "static_ram": sorted({f["delta"]["ram"] for f in fws}),
                    "static_ram_data": sorted({f["delta"]["ram_data"] for f in fws}),
                    "static_ram_split": ram,
                    "stack_setup_max": setup, "stack_allocate_max": alloc, "stack_invoke_max": invoke,
                    "stack_max": max(alloc, invoke),
                    "code_flash": sorted({f["delta"]["flash"] for f in fws}), "code_flash_split": parts,
                    "all_ran_and_match_wheel": ok,
                    "per_model": [{"model": f["model"], "input": f["input"], "classes": f["classes"],
                                   "stack_setup": f["run"].get("stack_setup"),
                                   "stack_allocate": f["run"].get("stack_allocate"),
                                   "stack_invoke": f["run"].get("stack_invoke"),
                                   "arena_used": f["run"].get("arena_used"),
                                   "ilp32_total": f["ilp32_estimate"]["total_bytes"],
                                   "ilp32_required": f["ilp32_estimate"]["required_bytes"],
                                   "static_ram": f["delta"]["ram"], "code_flash": f["delta"]["flash"],
                                   "output_equals_wheel": f["output_equals_wheel"]} for f in fws]})
    print("\n| core | build | model | AllocateTensors failing (1 KB arena given; logs an error): stack | "
          "status |")
    print("|---|---|---|---:|---|")
    for e in errors:
        print(f"| {e['core']} | {e['build_type']} | {e['model']} | {e['stack_allocate_failing']} | "
              f"{'failed as expected' if e['status'] == 3 and e['qemu_status'] == 0 else e} |")
    print("\n| core | build | op set | model | stack setup / AllocateTensors / Invoke | arena_used_bytes "
          "(ILP32 estimate total) | static RAM | code flash | output = wheel |")
    print("|---|---|---|---|---|---|---:|---:|---|")
    for s in summary:
        for p in s["per_model"]:
            print(f"| {s['core']} | {s['build_type']} | {s['variant']} | {p['model']} {p['input']} {p['classes']} cl. "
                  f"| {p['stack_setup']} / {p['stack_allocate']} / {p['stack_invoke']} | {p['arena_used']} "
                  f"({p['ilp32_total']}) | {p['static_ram']} | {p['code_flash']} | "
                  f"{'yes' if p['output_equals_wheel'] else 'NO'} |")
    if json_out is not None:
        # Per firmware: its sections, its delta to the baseline and what it printed (the link-map and symbol
        # splits, equal for every model of a variant, are in the summary; the full lists stay in BUILD).
        keep = ("variant", "model", "groups", "delta", "run", "output_equals_wheel")
        firmwares = [{"core": core, "build_type": build_type, **{k: f[k] for k in keep if k in f}}
                     for core, data in cores.items() for build_type, bt in data["build_types"].items()
                     for f in bt["firmwares"]]
        json_out.write_text(json.dumps({"summary": summary, "error_path": errors, "firmwares": firmwares},
                                       separators=(",", ":")) + "\n")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "collect":
        collect(Path(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == "tables":
        tables(Path(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) > 3 else None)
    else:
        sys.exit(__doc__)
