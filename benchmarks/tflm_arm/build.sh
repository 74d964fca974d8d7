#!/bin/sh
# Build TFLite Micro (reference kernels for CONV_2D, MAX_POOL_2D, MEAN, FULLY_CONNECTED) and main.cc
# for a Cortex-M4F (qemu-system-arm -M mps2-an386), with the flags of TFLM's own Makefile for
# TARGET=cortex_m_generic TARGET_ARCH=cortex-m4+fp (default BUILD_TYPE). See README.md.
#
# Usage: benchmarks/tflm_arm/build.sh BUILD_DIR     (BUILD_DIR holds models.cc from make_models.py)
# Environment (defaults in brackets):
#   TFLM_SRC [/work/tflm-src]          tflite-micro source tree
#   FLATBUFFERS_INC [/work/flatbuffers-src/include]   flatbuffers v25.9.23 headers + TFLM's patch
#   GEMMLOWP_INC [/work/gemmlowp-src]  google/gemmlowp at 719139ce (TFLM's pin): fixedpoint/, internal/
#   RUY_INC [/work/ruy-src]            google/ruy at d3712831 (TFLM's pin): ruy/profiler/
#   CXX_SHIM [BUILD_DIR/cxx-shim]      libstdc++ target config headers: made from the host's GCC 12
#                                      bits/ with cxx_shim/*.h laid over them (see README)
#   EXTRA_FLAGS []                     e.g. -fno-short-enums (arm-none-eabi-gcc's default is short enums)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: build.sh BUILD_DIR}
mkdir -p "$build" && build=$(cd "$build" && pwd)
TFLM_SRC=${TFLM_SRC:-/work/tflm-src}
FLATBUFFERS_INC=${FLATBUFFERS_INC:-/work/flatbuffers-src/include}
GEMMLOWP_INC=${GEMMLOWP_INC:-/work/gemmlowp-src}
RUY_INC=${RUY_INC:-/work/ruy-src}
if [ -z "${CXX_SHIM:-}" ]; then
  CXX_SHIM=$build/cxx-shim
  mkdir -p "$CXX_SHIM"
  cp -r /usr/include/x86_64-linux-gnu/c++/12/bits "$CXX_SHIM/"
  cp "$here"/cxx_shim/*.h "$CXX_SHIM/bits/"
  cp "$CXX_SHIM/bits/gthr-single.h" "$CXX_SHIM/bits/gthr-default.h"
fi
CXX=arm-none-eabi-g++
EXTRA_FLAGS=${EXTRA_FLAGS:-}

cpu="-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -mlittle-endian $EXTRA_FLAGS"
# TFLM Makefile COMMON_FLAGS + CXXFLAGS + cortex_m_generic PLATFORM_FLAGS (default build type).
flags="$cpu -std=c++17 -Os -fno-rtti -fno-exceptions -fno-threadsafe-statics
  -fno-unwind-tables -fno-asynchronous-unwind-tables -ffunction-sections -fdata-sections
  -fmessage-length=0 -fomit-frame-pointer -fsigned-char
  -DTF_LITE_STATIC_MEMORY -DTF_LITE_DISABLE_X86_NEON -DTF_LITE_MCU_DEBUG_LOG
  --specs=picolibc.specs -isystem /usr/include/c++/12 -isystem $CXX_SHIM
  -I$TFLM_SRC -I$FLATBUFFERS_INC -I$GEMMLOWP_INC -I$RUY_INC -I$build -I$here"

cd "$TFLM_SRC"
sources=$( (ls tensorflow/lite/micro/*.cc tensorflow/lite/micro/arena_allocator/*.cc \
               tensorflow/lite/micro/memory_planner/*.cc tensorflow/lite/micro/tflite_bridge/*.cc;
           find tensorflow -type d \( -path tensorflow/lite/experimental -o -path tensorflow/lite/micro \) \
               -prune -false -o -name '*.cc' -print | grep -v '^tensorflow/lite/array.cc$';
           for k in conv conv_common pooling pooling_common reduce reduce_common fully_connected \
                    fully_connected_common kernel_util; do echo tensorflow/lite/micro/kernels/$k.cc; done) \
         | grep -v -e '_test\.cc$' -e 'test_helper' -e 'mock_micro_graph' -e 'fake_micro_context' | sort -u)

mkdir -p "$build/obj"
echo "$sources" > "$build/sources.txt"
# Two jobs: the machine's cores are shared.
export CXX FLAGS="$(echo $flags)" BUILD="$build"
echo "$sources" | xargs -P 2 -n 1 sh -c '
  obj="$BUILD/obj/$(echo "$0" | tr / _ | sed "s/\.cc$/.o/")"
  [ "$obj" -nt "$0" ] || $CXX $FLAGS -c "$0" -o "$obj"'
rm -f "$build/libtflm.a"
arm-none-eabi-ar rcs "$build/libtflm.a" "$build"/obj/*.o

$CXX $flags -c "$here/main.cc" -o "$build/main.o"
$CXX $flags -c "$build/models.cc" -o "$build/models.o"
# picolibc's crt0 and picolibc.ld, placed in the AN386's 4 MB code SRAM (0x0) and 4 MB data SRAM.
arm-none-eabi-gcc $cpu --specs=picolibc.specs --oslib=semihost -Wl,--gc-sections \
  -Wl,--defsym=__flash=0x00000000 -Wl,--defsym=__flash_size=0x00400000 \
  -Wl,--defsym=__ram=0x20000000 -Wl,--defsym=__ram_size=0x00400000 \
  -Wl,--defsym=__stack_size=0x10000 \
  "$build/main.o" "$build/models.o" "$build/libtflm.a" -o "$build/tflm_arm.elf" -Wl,-Map="$build/tflm_arm.map"
arm-none-eabi-size "$build/tflm_arm.elf"
