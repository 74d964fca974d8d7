#!/bin/sh
# What TFLite Micro adds to a firmware beyond its arena, on one core: static RAM, code flash, stack.
# Builds TFLM (the sources build.sh uses, flags of TFLM's Makefile for TARGET=cortex_m_generic) once per
# build type (default; release = -DNDEBUG -DTF_LITE_STRIP_ERROR_STRINGS), then for every model of
# footprint_models.py links footprint.cc several ways (baseline without TFLM; op set 4; op set 3 when the
# model has no cells; each op set also with resolver and interpreter placement-new'd), runs each on QEMU and
# collects `arm-none-eabi-size -A`, the link map and the printed figures into BUILD_DIR/CORE/footprint.json.
# See README.md ("Footprint") and benchmarks/results/tflm-footprint.md.
#
# Usage: benchmarks/tflm_arm/footprint.sh BUILD_DIR CORE       CORE: m0 (qemu -M microbit) or m4 (-M mps2-an386)
# Environment: TFLM_SRC, FLATBUFFERS_INC, GEMMLOWP_INC, RUY_INC, CXX_SHIM as for build.sh;
#   BUILD_TYPES [default release] (also default-Os, release-Os: kernels at -Os instead of the Makefile's -O2);
#   JOBS [2] parallel compiles; QEMU_TIMEOUT [120] seconds per run.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: footprint.sh BUILD_DIR m0|m4}
core=${2:?usage: footprint.sh BUILD_DIR m0|m4}
mkdir -p "$build" && build=$(cd "$build" && pwd)
TFLM_SRC=${TFLM_SRC:-/work/tflm-src}
FLATBUFFERS_INC=${FLATBUFFERS_INC:-/work/flatbuffers-src/include}
GEMMLOWP_INC=${GEMMLOWP_INC:-/work/gemmlowp-src}
RUY_INC=${RUY_INC:-/work/ruy-src}
BUILD_TYPES=${BUILD_TYPES:-default release}
JOBS=${JOBS:-2}
QEMU_TIMEOUT=${QEMU_TIMEOUT:-120}
ARENA=8192

# TFLM's cortex_m_generic_makefile.inc: TARGET_ARCH=cortex-m0 -> -mcpu=cortex-m0 -mfpu=auto, soft float,
# -DCPU_M0=1 -DARMCM0; cortex-m4+fp -> -mcpu=cortex-m4 -mfpu=auto (= fpv4-sp-d16), hard float.
# Memory: picolibc's picolibc.ld placed with --defsym. The stack starts at the top of RAM; picolibc.ld's
# .stack section only reserves its default 2 KB minimum: the firmware paints and measures all the RAM
# between the end of .bss and main's frame.
case $core in
  m0) cpu="-mcpu=cortex-m0 -mfpu=auto -mthumb -mfloat-abi=soft"; cpu_defs="-DCPU_M0=1 -DARMCM0"
      machine=microbit
      memory="-Wl,--defsym=__flash=0x00000000 -Wl,--defsym=__flash_size=0x40000
              -Wl,--defsym=__ram=0x20000000 -Wl,--defsym=__ram_size=0x4000" ;;
  m4) cpu="-mcpu=cortex-m4 -mfpu=auto -mthumb -mfloat-abi=hard"; cpu_defs="-DCPU_M4=1 -DARMCM4"
      machine=mps2-an386
      memory="-Wl,--defsym=__flash=0x00000000 -Wl,--defsym=__flash_size=0x00400000
              -Wl,--defsym=__ram=0x20000000 -Wl,--defsym=__ram_size=0x00400000" ;;
  *) echo "footprint.sh: CORE must be m0 or m4, not $core" >&2; exit 2 ;;
esac

[ -f "$build/models/models.json" ] || python "$here/footprint_models.py" "$build"
if [ -z "${CXX_SHIM:-}" ]; then  # as build.sh
  CXX_SHIM=$build/cxx-shim
  mkdir -p "$CXX_SHIM"
  cp -r /usr/include/x86_64-linux-gnu/c++/12/bits "$CXX_SHIM/"
  cp "$here"/cxx_shim/*.h "$CXX_SHIM/bits/"
  cp "$CXX_SHIM/bits/gthr-single.h" "$CXX_SHIM/bits/gthr-default.h"
fi

# build.sh's source list, with tensorflow/lite/micro/debug_log.cc replaced by the cortex_m_generic one,
# as TFLM's Makefile specializes it for TARGET=cortex_m_generic. (The target's micro_time.cc needs CMSIS
# headers; the generic one is kept: only the profiler refers to it, and nothing here links it.)
cd "$TFLM_SRC"
sources=$( (ls tensorflow/lite/micro/*.cc tensorflow/lite/micro/arena_allocator/*.cc \
               tensorflow/lite/micro/memory_planner/*.cc tensorflow/lite/micro/tflite_bridge/*.cc;
           find tensorflow -type d \( -path tensorflow/lite/experimental -o -path tensorflow/lite/micro \) \
               -prune -false -o -name '*.cc' -print | grep -v '^tensorflow/lite/array.cc$';
           for k in conv conv_common pooling pooling_common reduce reduce_common fully_connected \
                    fully_connected_common kernel_util; do echo tensorflow/lite/micro/kernels/$k.cc; done) \
         | grep -v -e '_test\.cc$' -e 'test_helper' -e 'mock_micro_graph' -e 'fake_micro_context' \
         | sed 's#^tensorflow/lite/micro/debug_log\.cc$#tensorflow/lite/micro/cortex_m_generic/debug_log.cc#' \
         | sort -u)

models=$(python -c "import json,sys; print(' '.join(f\"{m['index']}:{m['cells']}\" for m in json.load(open(sys.argv[1]))))" \
         "$build/models/models.json")

for build_type in $BUILD_TYPES; do
  # default / release: TFLM's Makefile BUILD_TYPE. A suffix -Os compiles the kernels at -Os too instead
  # of the Makefile's KERNEL_OPTIMIZATION_LEVEL -O2 (as a project that builds everything at -Os would).
  case $build_type in
    *-Os) kernel_opt=-Os ;;
    *) kernel_opt=-O2 ;;
  esac
  case ${build_type%-Os} in
    default) type_defs="" ;;
    release) type_defs="-DNDEBUG -DTF_LITE_STRIP_ERROR_STRINGS" ;;  # TFLM Makefile, BUILD_TYPE=release
    *) echo "footprint.sh: unknown build type $build_type" >&2; exit 2 ;;
  esac
  out=$build/$core/$build_type
  mkdir -p "$out/obj" "$out/fw"
  # TFLM Makefile CXXFLAGS (COMMON_FLAGS, warnings left out) + cortex_m_generic PLATFORM_FLAGS + build type.
  # Optimization as the Makefile: CORE_OPTIMIZATION_LEVEL -Os, KERNEL_OPTIMIZATION_LEVEL -O2 for
  # tensorflow/lite/micro/kernels/ (MICROLITE_CC_KERNEL_SRCS).
  flags="$cpu -mlittle-endian -std=c++17 -fno-rtti -fno-exceptions -fno-threadsafe-statics
    -fno-unwind-tables -fno-asynchronous-unwind-tables -ffunction-sections -fdata-sections
    -fmessage-length=0 -fomit-frame-pointer -funsigned-char
    -DTF_LITE_STATIC_MEMORY -DTF_LITE_DISABLE_X86_NEON -DTF_LITE_MCU_DEBUG_LOG $cpu_defs $type_defs
    --specs=picolibc.specs -isystem /usr/include/c++/12 -isystem $CXX_SHIM
    -I$TFLM_SRC -I$FLATBUFFERS_INC -I$GEMMLOWP_INC -I$RUY_INC"
  flags=$(echo $flags)
  echo "$flags (-Os; tensorflow/lite/micro/kernels/: $kernel_opt)" > "$out/flags.txt"
  echo "$sources" > "$out/sources.txt"
  echo "footprint.sh: $core $build_type: compiling TFLM ($(echo "$sources" | wc -l) files)"
  export CXX=arm-none-eabi-g++ FLAGS="$flags" OBJ="$out/obj" KERNEL_OPT="$kernel_opt"
  echo "$sources" | xargs -P "$JOBS" -n 1 sh -c '
    obj="$OBJ/$(echo "$0" | tr / _ | sed "s/\.cc$/.o/")"
    case "$0" in tensorflow/lite/micro/kernels/*) opt=$KERNEL_OPT ;; *) opt=-Os ;; esac
    [ "$obj" -nt "$0" ] || nice $CXX $FLAGS $opt -c "$0" -o "$obj"'
  rm -f "$out/libtflm.a"
  arm-none-eabi-ar rcs "$out/libtflm.a" "$out"/obj/*.o

  for entry in $models; do
    index=${entry%%:*}; cells=${entry#*:}
    nice arm-none-eabi-g++ $flags -Os -c "$build/models/model$index.cc" -o "$out/fw/model$index.o"
    # ops3 only for models without cells (no MAX_POOL_2D); -pnew: placement new instead of function-statics.
    # ops4-small (first model only): the interpreter is given 1 KB of the arena, so AllocateTensors fails
    # and logs its error (the stack of that path: in the default build DebugLog's vsnprintf).
    variants="baseline ops4 ops4-pnew"
    [ "$cells" -ne 0 ] || variants="baseline ops3 ops3-pnew ops4 ops4-pnew"
    [ "$index" -ne 0 ] || variants="$variants ops4-small"
    for variant in $variants; do
      case $variant in
        baseline) defs="-DFOOTPRINT_BASELINE"; libs="" ;;
        ops3) defs="-DFOOTPRINT_OPS=3"; libs="$out/libtflm.a" ;;
        ops4) defs="-DFOOTPRINT_OPS=4"; libs="$out/libtflm.a" ;;
        ops3-pnew) defs="-DFOOTPRINT_OPS=3 -DFOOTPRINT_PLACEMENT_NEW"; libs="$out/libtflm.a" ;;
        ops4-pnew) defs="-DFOOTPRINT_OPS=4 -DFOOTPRINT_PLACEMENT_NEW"; libs="$out/libtflm.a" ;;
        ops4-small) defs="-DFOOTPRINT_OPS=4 -DFOOTPRINT_ARENA_GIVEN=1024 -DFOOTPRINT_EXPECT_ALLOCATE_FAILURE"
                    libs="$out/libtflm.a" ;;
      esac
      name=$variant-model$index
      nice arm-none-eabi-g++ $flags -Os -DFOOTPRINT_ARENA=$ARENA $defs -c "$here/footprint.cc" \
        -o "$out/fw/$name.o"
      # TFLM Makefile LDFLAGS (--gc-sections, --fatal-warnings) and MICROLITE_LIBS (-lm); picolibc's crt0
      # and linker script; semihosting only for crt0's exit (the app writes through SYS_WRITE0 itself).
      arm-none-eabi-gcc $cpu --specs=picolibc.specs --oslib=semihost -Wl,--gc-sections -Wl,--fatal-warnings \
        $memory "$out/fw/$name.o" "$out/fw/model$index.o" $libs -lm \
        -o "$out/fw/$name.elf" -Wl,-Map="$out/fw/$name.map"
      arm-none-eabi-size -A "$out/fw/$name.elf" > "$out/fw/$name.size"
      arm-none-eabi-nm -S --size-sort -C "$out/fw/$name.elf" > "$out/fw/$name.nm"
      status=0
      (cd "$out/fw" && timeout "$QEMU_TIMEOUT" qemu-system-arm -M $machine -nographic -monitor none \
        -serial none -semihosting-config enable=on,target=native -kernel "$name.elf" > "$name.log" 2>&1) \
        || status=$?
      echo "qemu_status=$status" >> "$out/fw/$name.log"
      echo "footprint.sh: $core $build_type $name: qemu status $status"
    done
  done
done
python "$here/footprint_report.py" collect "$build" "$core"
