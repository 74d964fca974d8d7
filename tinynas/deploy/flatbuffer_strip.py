"""Remove what a microcontroller never reads from a .tflite: tensor names and signatures.

The converter names every tensor after its fused Keras ops ("model/cell2_relu/Relu;
model/cell2_bn/batchnorm/add_1;..."), about a quarter of a small model's flash, and the
names change with Keras's per-process layer counters. TFLite Micro and index-based LiteRT
use none of them. The model is re-serialized with every buffer 16-byte aligned, as the
converter does, so int32 biases stay aligned for Cortex-M0 cores that fault on unaligned loads.
"""

from __future__ import annotations

import functools

from tinynas.quiet import quiet_environment

BUFFER_ALIGNMENT = 16


def strip_names(tflite: bytes) -> bytes:
    """Return `tflite` without tensor/subgraph names, description and signature defs."""

    quiet_environment()
    import flatbuffers
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(tflite))
    flatbuffer_utils.strip_strings(model)
    aligned = _aligned_buffer_class()
    for buffer in model.buffers:
        buffer.__class__ = aligned
    builder = flatbuffers.Builder(len(tflite))
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


@functools.cache
def _aligned_buffer_class():
    from tensorflow.lite.python import schema_py_generated as schema

    class AlignedBuffer(schema.BufferT):
        """BufferT whose data vector starts on a 16-byte boundary (schema: force_align 16)."""

        def Pack(self, builder):
            data = None
            if self.data is not None and len(self.data):
                payload = bytes(bytearray(self.data))
                builder.StartVector(1, len(payload), BUFFER_ALIGNMENT)
                builder.head = builder.head - len(payload)
                builder.Bytes[builder.head:builder.head + len(payload)] = payload
                data = builder.EndVector()
            schema.BufferStart(builder)
            if data is not None:
                schema.BufferAddData(builder, data)
            schema.BufferAddOffset(builder, self.offset)
            schema.BufferAddSize(builder, self.size)
            return schema.BufferEnd(builder)

    return AlignedBuffer
