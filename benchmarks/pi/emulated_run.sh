#!/usr/bin/env bash
# tinynas on an emulated Raspberry Pi 4: arm64 Debian bookworm under qemu-user, Cortex-A72.
#
#     sudo bash benchmarks/pi/emulated_run.sh        # from the repository root; root for chroot/mount
#
# Once (cached in $TINYNAS_PI_CACHE, default ~/.cache/tinynas-pi, outside the repository): downloads
# Debian's qemu-user-static and debootstrap packages with `apt-get download`, unpacks them there,
# and builds an arm64 bookworm root file system (Python 3.11, as Raspberry Pi OS bookworm). Every
# run: registers qemu-aarch64 with binfmt_misc (F flag: the interpreter is opened now, so it works
# inside the chroot), copies this checkout into the root file system, installs it there with pip
# (aarch64 wheels from PyPI) and, with QEMU_CPU=cortex-a72, checks
#   (a) the serving path: the service's LiveClassifier (LiteRT) on replayed windows of a model
#       exported on this x86_64 machine gives the same predictions as here;
#   (b) a one-candidate, few-epoch `tinynas search` with TensorFlow, export and LiteRT check.
# Under qemu-user /proc/cpuinfo is the host's x86 one, on which LiteRT's XNNPACK has been seen to
# crash (an emulator artefact, not a Pi issue); the chroot gets a Raspberry Pi 4's cpuinfo bound over
# it. (With qemu 7.2 and LiteRT 2.3.0, LiteRT also ran without it when tried by hand once.)
# Writes benchmarks/results/pi-emulated.md (the log, without timings: emulated speed means nothing).
# Not run in CI (downloads ~700 MB and runs for tens of minutes).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${TINYNAS_PI_CACHE:-$HOME/.cache/tinynas-pi}
tools=$cache/tools
rootfs=$cache/rootfs-bookworm-arm64
log=$(mktemp)
mkdir -p "$cache/debs" "$cache/pip"
say() { echo "$*" | tee -a "$log"; }

# --- tools, once ------------------------------------------------------------------------------
if [ ! -x "$tools/usr/bin/qemu-aarch64-static" ] || [ ! -x "$tools/usr/sbin/debootstrap" ]; then
    (cd "$cache/debs" && apt-get download qemu-user-static debootstrap)
    for deb in "$cache"/debs/*.deb; do dpkg-deb -x "$deb" "$tools"; done
fi
qemu=$tools/usr/bin/qemu-aarch64-static

# --- binfmt_misc --------------------------------------------------------------------------------
[ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:'"$qemu"':F' \
        > /proc/sys/fs/binfmt_misc/register
fi

# --- root file system, once -------------------------------------------------------------------------
if [ ! -e "$rootfs/.tinynas-complete" ]; then
    rm -rf "$rootfs"
    DEBOOTSTRAP_DIR=$tools/usr/share/debootstrap "$tools/usr/sbin/debootstrap" --arch=arm64 --variant=minbase \
        --include=python3,python3-venv,python3-pip,ca-certificates bookworm "$rootfs" http://deb.debian.org/debian
    touch "$rootfs/.tinynas-complete"
fi

# --- mounts for this run ----------------------------------------------------------------------------
{   # a Raspberry Pi 4's /proc/cpuinfo under 64-bit Raspberry Pi OS: four Cortex-A72 cores
    for cpu in 0 1 2 3; do
        printf 'processor\t: %s\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n' "$cpu"
        printf 'CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\nCPU revision\t: 3\n\n'
    done
    printf 'Hardware\t: BCM2835\nRevision\t: c03111\nModel\t\t: Raspberry Pi 4 Model B Rev 1.1\n'
} > "$rootfs/etc/pi4-cpuinfo"
mounted=()
cleanup() {
    for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
    rm -f "$log"
}
trap cleanup EXIT
bind() { mount "$@"; mounted+=("${@: -1}"); }
bind -t proc proc "$rootfs/proc"
bind --bind "$rootfs/etc/pi4-cpuinfo" "$rootfs/proc/cpuinfo"
bind -t sysfs sys "$rootfs/sys"
bind --bind /dev "$rootfs/dev"
bind -t devpts devpts "$rootfs/dev/pts"
mkdir -p "$rootfs/root/.cache/pip" "$rootfs/dev/shm"
bind --bind "$cache/pip" "$rootfs/root/.cache/pip"
bind -t tmpfs tmpfs "$rootfs/dev/shm"
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
# The host's CA bundle too: where a proxy re-signs TLS (as here), Debian's own bundle would refuse PyPI.
cp "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}" "$rootfs/etc/ssl/certs/host-bundle.crt"
run() { chroot "$rootfs" /usr/bin/env -i HOME=/root PATH=/opt/venv/bin:/usr/bin:/bin QEMU_CPU=cortex-a72 \
        PIP_CERT=/etc/ssl/certs/host-bundle.crt SSL_CERT_FILE=/etc/ssl/certs/host-bundle.crt \
        PYTHONDONTWRITEBYTECODE=1 TF_CPP_MIN_LOG_LEVEL=2 "$@"; }

# --- install this checkout ---------------------------------------------------------------------------
rm -rf "$rootfs/opt/src" && mkdir -p "$rootfs/opt/src"
(cd "$repo" && git ls-files -z | xargs -0 cp --parents -t "$rootfs/opt/src")
say "# tinynas under emulated aarch64 (qemu-user, QEMU_CPU=cortex-a72, Debian bookworm arm64)"
say ""
say "Command: \`sudo bash benchmarks/pi/emulated_run.sh\` ($(date +%F), tinynas $(cd "$repo" && git rev-parse --short HEAD))."
say "Timings are left out on purpose: emulated speed says nothing about a Raspberry Pi's."
say ""
say "- machine inside: $(run uname -m), $(run python3 --version), /proc/cpuinfo seen by programs: $(run sh -c 'grep -m1 "^Model" /proc/cpuinfo | cut -d: -f2- | xargs'), CPU part $(run sh -c 'grep -m1 "CPU part" /proc/cpuinfo | cut -d: -f2 | xargs') (Cortex-A72)"
[ -x "$rootfs/opt/venv/bin/python" ] || run python3 -m venv /opt/venv
run python -m pip install --quiet --upgrade pip
run python -m pip install --quiet --only-binary=:all: /opt/src
say "- installed with binary wheels only (pip in the arm64 Debian): $(run python -m pip list 2>/dev/null | grep -iE '^(tensorflow|ai-edge-litert|numpy|scipy|keras) ' | tr -s ' ' | paste -sd ',' | sed 's/,/, /g')"
say "- tflite-micro (verification extra, x86_64 only) installed: $(run python -c 'import importlib.util as u; print("yes" if u.find_spec("tflite_micro") else "no, as intended")')"

# --- (a) the serving path: x86 export, replayed windows, same predictions ------------------------------
data="synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1"
target=(--ram 1600 --flash 64k --macs 1M)   # admits only c = 0: the fast strategy trains one candidate
host=$(mktemp -d)
(cd "$repo" && python -m tinynas.cli search --data "$data" "${target[@]}" --strategy fast --final-epochs 5 \
    --budget 5m --out "$host/model" --json > "$host/card.json" 2> "$host/search.log")
(cd "$repo" && python benchmarks/pi/serve_check.py "$host/model" "$data" "$host/x86.json")
rm -rf "$rootfs/opt/check" && mkdir -p "$rootfs/opt/check" && cp -r "$host/model" "$rootfs/opt/check/model"
run python /opt/src/benchmarks/pi/serve_check.py /opt/check/model "$data" /opt/check/arm64.json > /dev/null
verdict=$(python - "$host/x86.json" "$rootfs/opt/check/arm64.json" <<'PY'
import json, sys
x86, arm = (json.load(open(p)) for p in sys.argv[1:])
same = sum(a == b for a, b in zip(x86["predictions"], arm["predictions"]))
ok = len(x86["predictions"]) == len(arm["predictions"]) > 0 and same == len(x86["predictions"])
print(f"{'PASS' if ok else 'FAIL'}: {arm['machine']} serving path classified {len(arm['predictions'])} replayed windows; "
      f"{same} of {len(x86['predictions'])} predictions equal to {x86['machine']}'s")
PY
)
say "- (a) $verdict"

# --- (b) a one-candidate, few-epoch search with TensorFlow -------------------------------------------
rm -rf "$rootfs/opt/check/search"
if run sh -c "cd /opt/check && tinynas search --data '$data' ${target[*]} --strategy fast --final-epochs 3 \
        --budget 30m --out /opt/check/search --json > /opt/check/search.json 2> /opt/check/search.log"; then
    summary=$(python - "$rootfs/opt/check/search/card.json" <<'PY'
import json, sys
card = json.load(open(sys.argv[1]))
s = card["search"]
print(f"PASS: tinynas search trained {s['trained']} candidate(s) with TensorFlow ({card['name']}, "
      f"{card['final_training']['epochs']} epochs), exported int8 ({card['flash_bytes']} B) and checked it with LiteRT: "
      f"int8 test accuracy {card['int8_test_accuracy']:.3f} on {card['split']['test']} windows; "
      f"TensorFlow {card['tools'].get('tensorflow', '?')}, LiteRT {card['tools'].get('ai-edge-litert', '?')}, "
      f"machine {card['tools'].get('machine', '?')}")
PY
)
else
    summary="FAIL: tinynas search under emulation: $(tail -3 "$rootfs/opt/check/search.log" | tr '\n' ' ')"
fi
say "- (b) $summary"
rm -rf "$host"
mkdir -p "$repo/benchmarks/results"
cp "$log" "$repo/benchmarks/results/pi-emulated.md"
grep -q "FAIL" "$log" && exit 1
exit 0
