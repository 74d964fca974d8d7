#!/usr/bin/env bash
# The test suite as CI runs it (README's Quick start, second line; `.ci/run` after the linters): first the system
# packages the tests drive for real, then the fast tier on two processes and the slow tier on three (half of the
# slow tier's time is real time, a person recording or a device: on two processes the cores idled 44 % of it).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's packages: a headless browser for the status page, and the Arm cross-compiler, its C library and QEMU for
# the generated C runtime on emulated Cortex-M0 / Cortex-M4 boards. As root they are installed; otherwise one line
# says what to install (the tests that need them then skip, or fail under CI=true, naming the tool).
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v arm-none-eabi-gcc >/dev/null 2>&1 || missing+=(gcc-arm-none-eabi)
[ -f /usr/lib/picolibc/arm-none-eabi/picolibc.specs ] || missing+=(picolibc-arm-none-eabi)
command -v qemu-system-arm >/dev/null 2>&1 || missing+=(qemu-system-arm)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "devtools/test.sh: installing ${missing[*]} (apt-get)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "devtools/test.sh: ${missing[*]} missing: install them (sudo apt-get install ${missing[*]}) for the tests that drive them" >&2
    fi
fi

python -m pytest -q -n 2 -m "not slow" --durations=25
python -m pytest -q -n 3 -m slow --durations=25
