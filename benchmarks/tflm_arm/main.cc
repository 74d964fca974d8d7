// TFLite Micro's real arena use on a 32-bit Cortex-M4, for the cost model's ILP32 tail.
//
// Runs under qemu-system-arm -M mps2-an386 with semihosting (picolibc --oslib=semihost), so printf
// reaches the host. For each model in models.cc it prints, as "key=value" lines that report.py reads:
//   * plain MicroInterpreter (what firmware uses: MicroAllocator + SingleArenaBufferAllocator +
//     GreedyMemoryPlanner, built the way MicroAllocator::Create(arena, size) builds them):
//     arena_used_bytes(), head (non-persistent) and tail (persistent) bytes;
//   * the smallest arena with which AllocateTensors() succeeds (bisection, 1-byte resolution);
//   * RecordingMicroInterpreter (what the Python wheel uses): totals and per-category recordings;
//   * the int8 output for an all-zero-point input (to compare with the wheel);
// and once, sizeof/alignof of the structures the cost model's Abi lists.

#include <cstdio>
#include <cstring>
#include <new>

#include "models.h"
#include "tensorflow/lite/micro/arena_allocator/single_arena_buffer_allocator.h"
#include "tensorflow/lite/micro/arena_allocator/recording_single_arena_buffer_allocator.h"
#include "tensorflow/lite/micro/kernels/conv.h"
#include "tensorflow/lite/micro/kernels/fully_connected.h"
#include "tensorflow/lite/micro/kernels/pooling.h"
#include "tensorflow/lite/micro/kernels/reduce.h"
#include "tensorflow/lite/micro/memory_planner/greedy_memory_planner.h"
#include "tensorflow/lite/micro/micro_allocation_info.h"
#include "tensorflow/lite/micro/micro_allocator.h"
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/micro/recording_micro_allocator.h"
#include "tensorflow/lite/micro/recording_micro_interpreter.h"
#include "tensorflow/lite/schema/schema_generated.h"

// Bare-metal C++ runtime pieces the library refers to (virtual destructors, pure virtuals).
extern "C" void __cxa_pure_virtual() { for (;;) {} }
void operator delete(void*) noexcept {}
void operator delete(void*, unsigned int) noexcept {}

namespace {

constexpr size_t kArenaSize = 512 * 1024;
alignas(16) uint8_t g_arena[kArenaSize];

// Mirror of micro_allocator.cc's file-local MicroBuiltinDataAllocator (vptr + one pointer).
class BuiltinDataAllocatorMirror : public tflite::TfLiteBridgeBuiltinDataAllocator {
 public:
  void* Allocate(size_t, size_t) override { return nullptr; }
  void Deallocate(void*) override {}
  tflite::IPersistentBufferAllocator* allocator_ = nullptr;
};

#define SIZE(T) std::printf("sizeof %s=%u align=%u\n", #T, (unsigned)sizeof(T), (unsigned)alignof(T))

void PrintSizes() {
  SIZE(void*);
  SIZE(TfLiteEvalTensor);
  SIZE(tflite::NodeAndRegistration);
  SIZE(TfLiteNode);
  SIZE(TfLiteTensor);
  SIZE(TfLiteAffineQuantization);
  SIZE(TfLiteIntArray);
  SIZE(TfLiteFloatArray);
  SIZE(tflite::SingleArenaBufferAllocator);
  SIZE(tflite::GreedyMemoryPlanner);
  SIZE(tflite::MicroAllocator);
  SIZE(BuiltinDataAllocatorMirror);
  SIZE(tflite::SubgraphAllocations);
  SIZE(tflite::ScratchBufferHandle);
  SIZE(tflite::internal::ScratchBufferRequest);
  SIZE(tflite::AllocationInfo);
  SIZE(tflite::RecordingMicroAllocator);
  SIZE(tflite::RecordingSingleArenaBufferAllocator);
  SIZE(tflite::OpDataConv);
  SIZE(tflite::OpDataPooling);
  SIZE(tflite::OpDataReduce);
  SIZE(tflite::OpDataFullyConnected);
  SIZE(TfLiteConvParams);
  SIZE(TfLitePoolParams);
  SIZE(TfLiteReducerParams);
  SIZE(TfLiteFullyConnectedParams);
  SIZE(TFLMRegistration);
  SIZE(tflite::MicroInterpreter);
}

using Resolver = tflite::MicroMutableOpResolver<4>;

void AddOps(Resolver& resolver) {
  resolver.AddConv2D();
  resolver.AddMaxPool2D();
  resolver.AddMean();
  resolver.AddFullyConnected();
}

// True if a plain interpreter can allocate `model` in `size` bytes.
bool Fits(const tflite::Model* model, const Resolver& resolver, size_t size) {
  tflite::MicroInterpreter interpreter(model, resolver, g_arena, size);
  return interpreter.AllocateTensors() == kTfLiteOk;
}

void Measure(const ModelEntry& entry, const Resolver& resolver) {
  const tflite::Model* model = tflite::GetModel(entry.data);
  std::printf("model=%s bytes=%u\n", entry.name, entry.size);

  {
    // Plain interpreter, built as MicroAllocator::Create(arena, size) builds it, keeping the
    // buffer allocator so head and tail can be read separately.
    auto* buffers = tflite::SingleArenaBufferAllocator::Create(g_arena, kArenaSize);
    uint8_t* planner_memory = buffers->AllocatePersistentBuffer(
        sizeof(tflite::GreedyMemoryPlanner), alignof(tflite::GreedyMemoryPlanner));
    auto* planner = new (planner_memory) tflite::GreedyMemoryPlanner();
    auto* allocator = tflite::MicroAllocator::Create(buffers, planner);
    tflite::MicroInterpreter interpreter(model, resolver, allocator);
    if (interpreter.AllocateTensors() != kTfLiteOk) {
      std::printf("plain_status=allocate_failed\n");
      return;
    }
    std::printf("plain_used=%u plain_head=%u plain_tail=%u\n",
                (unsigned)interpreter.arena_used_bytes(),
                (unsigned)buffers->GetNonPersistentUsedBytes(),
                (unsigned)buffers->GetPersistentUsedBytes());
    TfLiteTensor* input = interpreter.input(0);
    std::memset(input->data.int8, input->params.zero_point, input->bytes);
    if (interpreter.Invoke() != kTfLiteOk) {
      std::printf("plain_status=invoke_failed\n");
      return;
    }
    TfLiteTensor* output = interpreter.output(0);
    std::printf("output=");
    for (size_t i = 0; i < output->bytes; ++i) std::printf("%d%s", output->data.int8[i],
                                                           i + 1 < output->bytes ? "," : "\n");
    // Tail again after Invoke: nothing persistent should be added by Eval.
    std::printf("plain_tail_after_invoke=%u\n", (unsigned)buffers->GetPersistentUsedBytes());
  }

  {
    // The smallest arena AllocateTensors accepts (arena start is 16-byte aligned, as users do).
    size_t low = 0, high = kArenaSize;  // Fits(high), !Fits(low)
    while (high - low > 1) {
      size_t mid = (low + high) / 2;
      (Fits(model, resolver, mid) ? high : low) = mid;
    }
    std::printf("min_arena=%u\n", (unsigned)high);
  }

  {
    tflite::RecordingMicroInterpreter interpreter(model, resolver, g_arena, kArenaSize);
    if (interpreter.AllocateTensors() != kTfLiteOk) {
      std::printf("recording_status=allocate_failed\n");
      return;
    }
    const tflite::RecordingMicroAllocator& allocator = interpreter.GetMicroAllocator();
    const auto* buffers = allocator.GetSimpleMemoryAllocator();
    std::printf("recording_used=%u recording_head=%u recording_tail=%u\n",
                (unsigned)interpreter.arena_used_bytes(),
                (unsigned)buffers->GetNonPersistentUsedBytes(),
                (unsigned)buffers->GetPersistentUsedBytes());
    const struct {
      tflite::RecordedAllocationType type;
      const char* name;
    } kinds[] = {
        {tflite::RecordedAllocationType::kTfLiteEvalTensorData, "eval_tensors"},
        {tflite::RecordedAllocationType::kPersistentTfLiteTensorData, "persistent_tflite_tensors"},
        {tflite::RecordedAllocationType::kPersistentTfLiteTensorQuantizationData,
         "persistent_quantization"},
        {tflite::RecordedAllocationType::kPersistentBufferData, "persistent_buffers"},
        {tflite::RecordedAllocationType::kTfLiteTensorVariableBufferData, "variable_buffers"},
        {tflite::RecordedAllocationType::kNodeAndRegistrationArray, "node_and_registrations"},
        {tflite::RecordedAllocationType::kOpData, "op_data"},
    };
    for (const auto& kind : kinds) {
      tflite::RecordedAllocation recorded = allocator.GetRecordedAllocation(kind.type);
      std::printf("category %s requested=%u used=%u count=%u\n", kind.name,
                  (unsigned)recorded.requested_bytes, (unsigned)recorded.used_bytes,
                  (unsigned)recorded.count);
    }
    allocator.PrintAllocations();
  }
  std::printf("end_model\n");
}

}  // namespace

int main() {
  std::printf("tflm_arm: %d models, arena %u bytes\n", kModelCount, (unsigned)kArenaSize);
  PrintSizes();
  Resolver resolver;
  AddOps(resolver);
  for (int i = 0; i < kModelCount; ++i) Measure(kModels[i], resolver);
  std::printf("tflm_arm: done\n");
  std::fflush(stdout);
  // Semihosting SYS_EXIT (0x18) with ADP_Stopped_ApplicationExit, so QEMU ends with status 0.
  register int op asm("r0") = 0x18;
  register int reason asm("r1") = 0x20026;
  asm volatile("bkpt 0xab" : : "r"(op), "r"(reason) : "memory");
  return 0;
}
