// What TFLite Micro costs a firmware beyond its arena: the minimal application a firmware author
// writes for one tinynas int8 model, and (with -DFOOTPRINT_BASELINE) the same firmware without TFLM.
//
// Built and run by footprint.sh on qemu-system-arm -M microbit (Cortex-M0) and -M mps2-an386
// (Cortex-M4F), with picolibc's crt0 and linker script. footprint.sh subtracts the baseline's sections
// from the TFLM firmware's: same startup, libc, semihosting, the same 16-byte aligned static arena
// (FOOTPRINT_ARENA bytes) and the same model array (g_model, from footprint_models.py), both kept by a
// volatile read in both variants. So firmware - baseline is what TFLM (and the few lines of app code it
// needs) adds.
//
// The TFLM variant is the pattern of TFLM's own examples (person_detection's setup()): a
// function-static MicroMutableOpResolver<FOOTPRINT_OPS> with exactly the op set's ops added, and a
// function-static MicroInterpreter (constructed on first call; with -fno-threadsafe-statics each has a
// guard (4 bytes on Arm EABI), and, as neither class has a trivial destructor, each is registered with
// __aeabi_atexit, which brings in the C library's table of exit handlers). With
// -DFOOTPRINT_PLACEMENT_NEW the resolver and the interpreter are instead placement-new'd into static,
// suitably aligned buffers (TFLM's own memory_footprint example does this for its runner): no guards, no
// exit handlers.
// FOOTPRINT_OPS = 3: CONV_2D, MEAN, FULLY_CONNECTED (tinynas A(k, 0)); 4: adds MAX_POOL_2D (c > 0).
//
// DebugLog is TFLM's own cortex_m_generic one (tensorflow/lite/micro/cortex_m_generic/debug_log.cc,
// what TFLM's Makefile builds for TARGET=cortex_m_generic): in the default build it formats into a
// 256-byte stack buffer with vsnprintf and hands the string to a callback, which this app registers
// and which writes it through semihosting (SYS_WRITE0). With TF_LITE_STRIP_ERROR_STRINGS (the
// release build) DebugLog is an empty function and the app registers no callback.
//
// Printed through semihosting SYS_WRITE0 ("key=value" lines; no printf, so that libc's printf is in
// the firmware only if TFLM pulls it in): the stack peaks of the setup (constructing the resolver and
// the interpreter), of AllocateTensors() and of Invoke(), the arena_used_bytes(), the output bytes.
// Stack peaks: before each call the free stack (from the end of .bss up to main's stack pointer) is
// painted with a pattern, after it the lowest changed word is found; the peak is main's stack pointer
// minus that word's address, so it includes the call from main (the baseline's figures show that
// part). No interrupt runs.

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef FOOTPRINT_BASELINE
#include <new>

#include "tensorflow/lite/micro/cortex_m_generic/debug_log_callback.h"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"
#endif

#ifndef FOOTPRINT_ARENA
#define FOOTPRINT_ARENA 8192
#endif
#ifndef FOOTPRINT_OPS
#define FOOTPRINT_OPS 4
#endif
// The arena size the interpreter is given; less than FOOTPRINT_ARENA (with
// -DFOOTPRINT_EXPECT_ALLOCATE_FAILURE) makes AllocateTensors fail and log an error through DebugLog, to
// measure the stack of that path.
#ifndef FOOTPRINT_ARENA_GIVEN
#define FOOTPRINT_ARENA_GIVEN FOOTPRINT_ARENA
#endif

extern "C" {
extern const unsigned char g_model[];  // model<i>.cc, from footprint_models.py
extern const unsigned int g_model_len;
extern uint32_t __bss_end[];  // picolibc.ld: end of .bss, where the free RAM (heap, then stack) begins
}

// The tensor arena, as an app declares it (external linkage: GCC would otherwise place a never-written
// internal array in .rodata in the baseline).
alignas(16) uint8_t g_arena[FOOTPRINT_ARENA];

namespace {

constexpr uint32_t kPattern = 0xA5A5A5A5u;

// ---- semihosting: SYS_WRITE0 and SYS_EXIT ----
inline int SemihostCall(int op, const void* arg) {
  register int r0 asm("r0") = op;
  register const void* r1 asm("r1") = arg;
  asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void Write0(const char* text) { SemihostCall(0x04, text); }

[[noreturn]] void Exit(bool ok) {
  // On 32-bit Arm SYS_EXIT takes the reason in r1: ADP_Stopped_ApplicationExit (QEMU exits 0) or
  // ADP_Stopped_RunTimeErrorUnknown (QEMU exits 1).
  SemihostCall(0x18, reinterpret_cast<const void*>(ok ? 0x20026u : 0x20023u));
  for (;;) {
  }
}

// Appends the decimal `value` to `out` (no printf).
char* PutInt(char* out, int32_t value) {
  char digits[12];
  int n = 0;
  uint32_t magnitude = value < 0 ? 0u - static_cast<uint32_t>(value) : static_cast<uint32_t>(value);
  do {
    digits[n++] = static_cast<char>('0' + magnitude % 10u);
    magnitude /= 10u;
  } while (magnitude != 0u);
  if (value < 0) *out++ = '-';
  while (n > 0) *out++ = digits[--n];
  return out;
}

void PrintValue(const char* key, int32_t value) {
  char line[64];
  char* at = line;
  while (*key != '\0' && at < line + 40) *at++ = *key++;
  *at++ = '=';
  at = PutInt(at, value);
  *at++ = '\n';
  *at = '\0';
  Write0(line);
}

// ---- stack painting (naked: they touch no stack themselves) ----
// Fills every word from `limit` up to (not including) the caller's stack pointer with kPattern.
__attribute__((naked, noinline)) void PaintStack(uint32_t* /*limit*/) {
  asm volatile(
      ".syntax unified\n\t"
      "mov r1, sp\n\t"
      "ldr r2, =0xA5A5A5A5\n\t"
      "1:\n\t"
      "cmp r0, r1\n\t"
      "bhs 2f\n\t"
      "str r2, [r0]\n\t"
      "adds r0, r0, #4\n\t"
      "b 1b\n\t"
      "2:\n\t"
      "bx lr\n\t"
      ".ltorg\n\t");
}

// The caller's stack pointer.
__attribute__((naked, noinline)) uint32_t* StackPointer() {
  asm volatile(
      "mov r0, sp\n\t"
      "bx lr\n\t");
}

// Bytes below `sp` that were written since PaintStack; -1 if the stack reached the end of .bss.
// Inlined into main, so that no call of its own writes below main's stack pointer before the scan.
__attribute__((always_inline)) inline int32_t StackPeak(const uint32_t* sp) {
  const uint32_t* low = __bss_end;
  while (low < sp && *low == kPattern) ++low;
  if (low == __bss_end) return -1;
  return static_cast<int32_t>(reinterpret_cast<uintptr_t>(sp) - reinterpret_cast<uintptr_t>(low));
}

// Keeps the arena and the model in the image of both variants (the baseline references them only here).
__attribute__((noinline)) void Touch() {
  volatile uint8_t sink;
  *static_cast<volatile uint8_t*>(&g_arena[FOOTPRINT_ARENA - 1]) = 0;
  sink = *static_cast<volatile const uint8_t*>(&g_arena[FOOTPRINT_ARENA - 1]);
  sink = *static_cast<volatile const uint8_t*>(&g_model[g_model_len - 1]);
  (void)sink;
}

#ifndef FOOTPRINT_BASELINE
// ---- the application ----
tflite::MicroInterpreter* g_interpreter = nullptr;

#ifndef TF_LITE_STRIP_ERROR_STRINGS
void LogToSemihost(const char* text) { Write0(text); }
#endif

using Resolver = tflite::MicroMutableOpResolver<FOOTPRINT_OPS>;
#ifdef FOOTPRINT_PLACEMENT_NEW
alignas(Resolver) uint8_t g_resolver_buffer[sizeof(Resolver)];
alignas(tflite::MicroInterpreter) uint8_t g_interpreter_buffer[sizeof(tflite::MicroInterpreter)];
#endif

// 0 on success.
__attribute__((noinline)) int Setup() {
#ifndef TF_LITE_STRIP_ERROR_STRINGS
  RegisterDebugLogCallback(LogToSemihost);
#endif
  const tflite::Model* model = tflite::GetModel(g_model);
  if (model->version() != TFLITE_SCHEMA_VERSION) return 1;
#ifdef FOOTPRINT_PLACEMENT_NEW
  Resolver& resolver = *new (g_resolver_buffer) Resolver();
#else
  static Resolver resolver;
#endif
  if (resolver.AddConv2D() != kTfLiteOk) return 2;
#if FOOTPRINT_OPS == 4
  if (resolver.AddMaxPool2D() != kTfLiteOk) return 2;
#endif
  if (resolver.AddMean() != kTfLiteOk) return 2;
  if (resolver.AddFullyConnected() != kTfLiteOk) return 2;
#ifdef FOOTPRINT_PLACEMENT_NEW
  g_interpreter = new (g_interpreter_buffer)
      tflite::MicroInterpreter(model, resolver, g_arena, FOOTPRINT_ARENA_GIVEN);
#else
  static tflite::MicroInterpreter interpreter(model, resolver, g_arena, FOOTPRINT_ARENA_GIVEN);
  g_interpreter = &interpreter;
#endif
  return 0;
}

__attribute__((noinline)) int Allocate() { return g_interpreter->AllocateTensors() == kTfLiteOk ? 0 : 3; }

__attribute__((noinline)) void FillInput() {
  TfLiteTensor* input = g_interpreter->input(0);
  memset(input->data.int8, input->params.zero_point, input->bytes);
}

__attribute__((noinline)) int Invoke() { return g_interpreter->Invoke() == kTfLiteOk ? 0 : 4; }

int32_t ArenaUsed() { return static_cast<int32_t>(g_interpreter->arena_used_bytes()); }

void PrintOutput() {
  const TfLiteTensor* output = g_interpreter->output(0);
  PrintValue("output_bytes", static_cast<int32_t>(output->bytes));
  for (size_t i = 0; i < output->bytes; ++i) PrintValue("out", output->data.int8[i]);
}
#else
// ---- the baseline: the same calls, no TFLM ----
__attribute__((noinline)) int Setup() { return 0; }
__attribute__((noinline)) int Allocate() { return 0; }
__attribute__((noinline)) void FillInput() {}
__attribute__((noinline)) int Invoke() { return 0; }
int32_t ArenaUsed() { return 0; }
void PrintOutput() { PrintValue("output_bytes", 0); }
#endif

}  // namespace

#ifndef FOOTPRINT_BASELINE
// The bare-metal C++ runtime pieces TFLM refers to (pure virtuals; the operator delete of its classes'
// virtual destructors). No heap: nothing is ever deleted.
extern "C" void __cxa_pure_virtual() {
  for (;;) {
  }
}
void operator delete(void*) noexcept {}
void operator delete(void*, unsigned int) noexcept {}

#ifndef FOOTPRINT_PLACEMENT_NEW
// A function-static object with a non-trivial destructor (both TFLM objects have one) is registered
// with __aeabi_atexit, which libsupc++ provides on Arm; Debian's toolchain ships no libsupc++, so here
// is libsupc++'s definition (atexit_arm.cc): it hands the destructor to the C library's __cxa_atexit.
extern "C" int __cxa_atexit(void (*destructor)(void*), void* object, void* dso_handle);
extern "C" int __aeabi_atexit(void* object, void (*destructor)(void*), void* dso_handle) {
  return __cxa_atexit(destructor, object, dso_handle);
}
#endif
#endif

int main() {
  uint32_t* sp = StackPointer();
  Touch();

  PaintStack(__bss_end);
  int status = Setup();
  int32_t setup_stack = StackPeak(sp);

  int32_t allocate_stack = 0, invoke_stack = 0;
  if (status == 0) {
    PaintStack(__bss_end);
    status = Allocate();
    allocate_stack = StackPeak(sp);
  }
  if (status == 0) {
    FillInput();
    PaintStack(__bss_end);
    status = Invoke();
    invoke_stack = StackPeak(sp);
  }
  PrintValue("status", status);
  PrintValue("free_stack_region", static_cast<int32_t>(reinterpret_cast<uintptr_t>(sp) -
                                                       reinterpret_cast<uintptr_t>(__bss_end)));
  PrintValue("stack_setup", setup_stack);
  PrintValue("stack_allocate", allocate_stack);
  PrintValue("stack_invoke", invoke_stack);
  if (status == 0) {
    PrintValue("arena_used", ArenaUsed());
    PrintOutput();
  }
  Write0("end\n");
#ifdef FOOTPRINT_EXPECT_ALLOCATE_FAILURE
  Exit(status == 3 && setup_stack >= 0 && allocate_stack >= 0);
#else
  Exit(status == 0 && setup_stack >= 0 && allocate_stack >= 0 && invoke_stack >= 0);
#endif
}
