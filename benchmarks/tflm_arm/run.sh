#!/bin/sh
# Make the models, build TFLM + main.cc for the Cortex-M4, run it on QEMU's mps2-an386, print the report.
# Usage: benchmarks/tflm_arm/run.sh BUILD_DIR [LABEL]     (EXTRA_FLAGS=-fno-short-enums for 32-bit enums)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [LABEL]}
mkdir -p "$build" && build=$(cd "$build" && pwd)
[ -f "$build/models.cc" ] || python "$here/make_models.py" "$build"
"$here/build.sh" "$build"
# -icount is not needed: nothing here is timed. Semihosting carries printf; main ends with SYS_EXIT.
(cd "$build" && timeout 600 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
  -semihosting-config enable=on,target=native -kernel tflm_arm.elf > run.log 2>&1)
python "$here/report.py" "$build" "${2:-$build}"
