"""Analytic cost of an `Architecture`: MACs, parameters, flash bytes and TFLite Micro arena bytes.

Runs without TensorFlow, in well under a millisecond, so every candidate is checked against
its target before any training. The arena model replays what TFLite Micro does when it
allocates the int8 graph (see `graph.lower`):

* head: the activation buffers and kernel scratch placed by the greedy memory planner
  (`memory_planner`), exact to the byte;
* tail: the persistent allocations, in TFLM's order with its alignment rules: allocator
  objects, one TfLiteEvalTensor per tensor, one NodeAndRegistration per operator, builtin
  options, kernel OpData, per-channel requantization arrays, scratch handles and the
  interpreter's input/output TfLiteTensors. Struct sizes differ between a 64-bit host
  (`LP64`, checked against tflite-micro's recording allocator) and a 32-bit microcontroller
  (`ILP32`, derived from the same struct definitions; the budget check uses this one).

`runtime` chooses what the budget check counts: "tflm" (the default) is the TFLite Micro arena above
and the .tflite's size; "c" is tinynas's generated C runtime (`tinynas.cost.c_runtime`): its static
arena + the caller's input and output buffers + its stack as RAM, its constant tables + code as flash.
The C runtime is budgeted for 32-bit microcontrollers only, so `runtime="c"` takes the ILP32 ABI.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from tinynas.cost.c_runtime import estimate_c
from tinynas.cost.graph import Graph, lower
from tinynas.cost.memory_planner import ARENA_ALIGNMENT, Buffer, align_up, planned_size
from tinynas.cost.targets import Target, kib
from tinynas.errors import TinynasError, UsageError
from tinynas.space import Architecture


@dataclass(frozen=True)
class Abi:
    """Sizes (bytes) and alignments of TFLM's persistent structures on one kind of machine."""

    name: str
    pointer: int
    eval_tensor: int
    node_and_registration: int
    tflite_tensor: int
    affine_quantization: int
    allocator_objects: tuple[int, ...]  # buffer allocator, greedy planner, micro allocator, builtin-data allocator
    subgraph_allocations: int
    scratch_handle: int
    scratch_request: int
    allocation_info: int
    op_data: dict[str, int] = field(default_factory=dict)
    builtin_options: dict[str, tuple[int, int]] = field(default_factory=dict)


PLANNER_BYTES_PER_BUFFER = 40
"""GreedyMemoryPlanner bookkeeping per planned buffer (same on both ABIs), a planning-time temporary."""

LP64 = Abi(
    name="lp64", pointer=8, eval_tensor=24, node_and_registration=64, tflite_tensor=64,
    affine_quantization=24, allocator_objects=(104, 72, 272, 16), subgraph_allocations=24,
    scratch_handle=8, scratch_request=16, allocation_info=32,
    op_data={"CONV_2D": 80, "MAX_POOL_2D": 32, "MEAN": 44, "FULLY_CONNECTED": 72},
    builtin_options={"CONV_2D": (28, 4), "MAX_POOL_2D": (40, 4), "MEAN": (1, 1),
                     "FULLY_CONNECTED": (32, 8)},
)
"""The 64-bit host that tflite-micro's Python wheel runs on (what `tinynas measure` reports)."""

ILP32 = Abi(
    name="ilp32", pointer=4, eval_tensor=12, node_and_registration=32, tflite_tensor=40,
    affine_quantization=12, allocator_objects=(36, 44, 36, 8), subgraph_allocations=8,
    scratch_handle=4, scratch_request=12, allocation_info=24,
    op_data={"CONV_2D": 56, "MAX_POOL_2D": 32, "MEAN": 44, "FULLY_CONNECTED": 48},
    builtin_options={"CONV_2D": (28, 4), "MAX_POOL_2D": (40, 4), "MEAN": (1, 1),
                     "FULLY_CONNECTED": (16, 4)},
)
"""A 32-bit Cortex-M (or ISPU) build of TFLM's plain MicroInterpreter. Sizes measured with TFLM built by
arm-none-eabi-gcc 12.2 for a Cortex-M4 and run under QEMU (benchmarks/results/tflm-arm-tail.md): with them
the replay gives that build's tail to the byte on 6 models. Enums are taken as 32-bit (-fno-short-enums);
gcc's default short enums make TfLiteTensor and the dense layer's options smaller, so the figure is then
at most 24 bytes high. (The first ILP32 figures, derived by hand from the struct definitions, were
144-184 bytes high.)"""

ABIS = {abi.name: abi for abi in (LP64, ILP32)}

RUNTIMES = ("tflm", "c")
"""What runs the model on the device: TFLite Micro's interpreter, or tinynas's generated C (`--runtime`)."""
RUNTIME_NAMES = {"tflm": "TFLite Micro", "c": "tinynas's generated C runtime"}


def check_runtime(runtime: object) -> str:
    """`runtime` if it is one of RUNTIMES, else a one-line UsageError naming them."""
    if not isinstance(runtime, str) or runtime not in RUNTIMES:
        raise UsageError(f"unknown runtime {runtime!r}; choose one of: {', '.join(RUNTIMES)}")
    return runtime

# Flash: the flatbuffer after `flatbuffer_strip` (no tensor names). Constant data is counted
# exactly (16-byte aligned buffers) plus 12 bytes per quantized channel (float scale + int64
# zero point); the rest is a fixed part and a per-cell part fitted once over 40 converted
# models (benchmarks/calibrate_flash.py); residuals stay under 2 %.
FLASH_FIXED_BYTES = 1513
FLASH_PER_CELL_BYTES = 503
FLASH_PER_QUANT_CHANNEL_BYTES = 12


class BudgetError(TinynasError, ValueError):
    """A target budget that no architecture of the space can meet."""


class _Tail:
    """TFLM's tail allocator: allocations grow down from the arena end, aligned down."""

    def __init__(self) -> None:
        self.bytes = 0

    def allocate(self, size: int, alignment: int) -> None:
        self.bytes = align_up(self.bytes + size, alignment)


def _scratch_requests(graph: Graph) -> list[tuple[int, int]]:
    """(bytes, operator index) of each scratch buffer the int8 reference kernels request."""
    requests = []
    for index, op in enumerate(graph.operators):
        if op.kind == "MEAN":
            source, axes = (graph.tensors[i] for i in op.inputs)
            output = graph.tensors[op.outputs[0]]
            requests.append((4 * output.elements, index))   # int32 accumulators
            requests.append((4 * len(source.shape), index))  # resolved axes
            requests.append((4 * axes.elements, index))      # temp index
    return requests


def _planned_buffers(graph: Graph, scratch: list[tuple[int, int]]) -> list[Buffer]:
    """Arena buffers with TFLM's lifetimes: scope i+1 for operator i, 0 for inputs."""
    count = len(graph.operators)
    first: dict[int, int] = {graph.input_index: 0}
    last: dict[int, int] = {graph.input_index: 0}
    for index, op in enumerate(graph.operators):
        scope = index + 1
        for tensor in op.outputs:
            first.setdefault(tensor, scope)
            last[tensor] = scope
        for tensor in op.inputs:
            last[tensor] = scope
    last[graph.output_index] = count
    buffers = [Buffer(align_up(tensor.nbytes), first[i], last[i])
               for i, tensor in enumerate(graph.tensors) if not tensor.constant]
    buffers += [Buffer(align_up(size), index + 1, index + 1) for size, index in scratch]
    return buffers


@dataclass(frozen=True)
class ArenaEstimate:
    """The TFLite Micro arena for one ABI: what it reports and what must be reserved."""

    head_bytes: int
    tail_bytes: int
    total_bytes: int
    required_bytes: int


def estimate_arena(arch: Architecture, abi: Abi = ILP32) -> ArenaEstimate:
    """Arena head/tail/total as TFLM reports them, and the minimum arena that allocates."""
    graph = lower(arch)
    scratch = _scratch_requests(graph)
    buffers = _planned_buffers(graph, scratch)
    head = planned_size(buffers)

    word = abi.pointer
    tail = _Tail()
    for size in abi.allocator_objects:
        tail.allocate(size, word)
    tail.allocate(abi.subgraph_allocations, word)
    tail.allocate(abi.eval_tensor * len(graph.tensors), word)
    tail.allocate(abi.node_and_registration * len(graph.operators), word)
    for op in graph.operators:
        tail.allocate(*abi.builtin_options[op.kind])
    for op in graph.operators:
        tail.allocate(abi.op_data[op.kind], ARENA_ALIGNMENT)
    for op in graph.operators:
        if op.kind not in ("CONV_2D", "FULLY_CONNECTED"):
            continue
        weights = graph.tensors[op.inputs[1]]  # both take (input, weights, bias)
        if op.kind == "CONV_2D" or weights.per_channel:
            channels = weights.shape[0]
            tail.allocate(4 * channels, ARENA_ALIGNMENT)  # per-channel multipliers
            tail.allocate(4 * channels, ARENA_ALIGNMENT)  # per-channel shifts
    if scratch:
        tail.allocate(abi.scratch_handle * len(scratch), word)
    tail_at_plan = tail.bytes
    for _endpoint in ("input", "output"):
        tail.allocate(abi.pointer, ARENA_ALIGNMENT)  # TfLiteTensor* array of size 1
        tail.allocate(abi.tflite_tensor, word)
        tail.allocate(abi.affine_quantization, word)
        tail.allocate(4 + 4, 4)  # zero-point TfLiteIntArray with one entry
    # Planning needs temporaries in the head region: requests, AllocationInfo, planner arrays.
    temporaries = (align_up(align_up(abi.scratch_request * (len(scratch) + 12), word)
                            + word + abi.allocation_info * (len(graph.tensors) + len(scratch)))
                   + PLANNER_BYTES_PER_BUFFER * len(buffers))
    required = max(head + tail.bytes, align_up(tail_at_plan) + temporaries)
    return ArenaEstimate(head, tail.bytes, head + tail.bytes, align_up(required))


def macs(arch: Architecture) -> int:
    """Multiply-accumulates per inference: C_in * K * T_out * C_out per conv, in * out for the head."""
    total, channels = 0, arch.input_channels
    for filters, length in zip(arch.filters, arch.lengths):
        total += channels * arch.kernel_size * length * filters
        channels = filters
    return total + channels * arch.classes


def params(arch: Architecture) -> int:
    """Parameters of the Keras model (conv kernels, batch-norm's 4 per channel, dense head)."""
    total, channels = 0, arch.input_channels
    for filters in arch.filters:
        total += channels * arch.kernel_size * filters + 4 * filters
        channels = filters
    return total + channels * arch.classes + arch.classes


def flash_bytes(arch: Architecture) -> int:
    """Estimated size of the exported int8 .tflite (names stripped)."""
    graph = lower(arch)
    data = sum(align_up(tensor.nbytes) for tensor in graph.tensors if tensor.constant)
    channels = sum(tensor.shape[0] if tensor.per_channel else 1
                   for tensor in graph.tensors if not (tensor.constant and not tensor.per_channel))
    return (FLASH_FIXED_BYTES + FLASH_PER_CELL_BYTES * arch.c
            + FLASH_PER_QUANT_CHANNEL_BYTES * channels + data)


@dataclass(frozen=True)
class Cost:
    """Everything the budget check needs about one architecture, on one ABI, for one runtime.

    For runtime "c", `arena_*` is the C runtime's static arena (no tail), `peak_ram_bytes` adds the
    caller's input/output buffers and the stack, and `flash_bytes` is its tables + code.
    """

    macs: int
    params: int
    flash_bytes: int
    arena_head_bytes: int
    arena_tail_bytes: int
    arena_bytes: int
    peak_ram_bytes: int
    abi: str
    runtime: str = "tflm"

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return asdict(self)

    def violations(self, target: Target) -> list[str]:
        """Human-readable reasons this architecture does not fit `target` (empty if it fits)."""
        found = []
        if self.peak_ram_bytes > target.ram_bytes:
            found.append(f"RAM {kib(self.peak_ram_bytes)} > {kib(target.ram_bytes)}")
        if self.flash_bytes > target.flash_bytes:
            found.append(f"flash {kib(self.flash_bytes)} > {kib(target.flash_bytes)}")
        if self.macs > target.mac_budget:
            found.append(f"MACs {self.macs:,} > {target.mac_budget:,}")
        return found

    def fits(self, target: Target) -> bool:
        """True if the architecture meets every budget of `target`."""
        return not self.violations(target)


def estimate(arch: Architecture, abi: Abi | str = ILP32, runtime: str = "tflm") -> Cost:
    """Analytic cost of `arch` for `runtime`; `peak_ram_bytes` is the RAM to reserve on `abi` (default 32-bit).

    Runtime "c" exists for 32-bit microcontrollers only: asking for it on the 64-bit host ABI is a
    UsageError rather than a figure silently computed for another machine.
    """
    from tinynas.arguments import require

    require(arch, Architecture, "the architecture", "an Architecture, e.g. Architecture(512, 1, 4, k=3, c=2)")
    runtime = check_runtime(runtime)
    if isinstance(abi, str):
        abi = ABIS[abi]
    if runtime == "c":
        if abi.name != ILP32.name:
            raise UsageError(f"the C runtime is budgeted for 32-bit microcontrollers (abi ilp32) only, not {abi.name}")
        c = estimate_c(arch)
        return Cost(macs=macs(arch), params=params(arch), flash_bytes=c.flash_bytes,
                    arena_head_bytes=c.arena_bytes, arena_tail_bytes=0, arena_bytes=c.arena_bytes,
                    peak_ram_bytes=c.ram_bytes, abi=abi.name, runtime=runtime)
    arena = estimate_arena(arch, abi)
    return Cost(macs=macs(arch), params=params(arch), flash_bytes=flash_bytes(arch),
                arena_head_bytes=arena.head_bytes, arena_tail_bytes=arena.tail_bytes,
                arena_bytes=arena.total_bytes, peak_ram_bytes=arena.required_bytes, abi=abi.name,
                runtime=runtime)


METHOD_ROUNDING = 512
"""The method's RAM tool (ST's stm32tflm, as its authors' BearingNAS code searched with it) reports the TFLite Micro
arena measured on a 64-bit host, rounded up to 512 bytes: checked on its three shipped models (uint8 I/O, QUANTIZE
ops included: 3,760 -> 4,096, 6,080 -> 6,144, 6,944 -> 7,168 B measured here with tflite-micro)."""


def method_ram_bytes(arch: Architecture) -> int:
    """The RAM the method's own accounting gives an int8 A(k, c): the 64-bit host arena rounded up to 512 B. Not
    what the chip needs (issue 37): a figure to compare with the method's published ones under its own rule."""
    arena = estimate_arena(arch, LP64).total_bytes
    return -(-arena // METHOD_ROUNDING) * METHOD_ROUNDING


def check_space_fits(target: Target, input_length: int, input_channels: int, classes: int,
                     runtime: str = "tflm") -> None:
    """Raise BudgetError in one line if even the smallest architecture, A(1, 0), misses `target`."""
    smallest = Architecture(input_length, input_channels, classes, k=1, c=0)
    problems = estimate(smallest, runtime=runtime).violations(target)
    if problems:
        # Said only for the C runtime, so that the TFLite Micro message reads as it always has.
        where = " with the C runtime" if runtime == "c" else ""
        raise BudgetError(
            f"target {target.name} cannot hold even the smallest network A(1,0) for "
            f"{input_length}x{input_channels} input and {classes} classes{where}: {'; '.join(problems)}")
