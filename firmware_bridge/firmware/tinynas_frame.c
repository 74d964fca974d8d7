/* tinynas serial frame encoder (see tinynas_frame.h and PROTOCOL.md). */
#include "tinynas_frame.h"

#include <string.h>

uint32_t tn_crc32(const uint8_t *data, size_t length) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < length; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
  }
  return crc ^ 0xFFFFFFFFu;
}

size_t tn_cobs_encode(const uint8_t *data, size_t length, uint8_t *out) {
  /* Same block rule as the Python encoder: zero-delimited blocks, runs of 254 bytes get code 0xFF. */
  size_t written = 0;
  size_t start = 0;
  for (;;) {
    size_t end = start;
    while (end < length && data[end] != 0) ++end;
    size_t block = end - start;
    const uint8_t *cursor = data + start;
    while (block >= 254) {
      out[written++] = 0xFF;
      memcpy(out + written, cursor, 254);
      written += 254;
      cursor += 254;
      block -= 254;
    }
    out[written++] = (uint8_t)(block + 1);
    memcpy(out + written, cursor, block);
    written += block;
    if (end >= length) break;
    start = end + 1;
  }
  return written;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }

size_t tn_encode_frame(uint8_t type, uint16_t sequence, const uint8_t *payload, uint16_t length,
                       uint8_t *scratch, uint8_t *out, size_t capacity) {
  if (length > TN_MAX_PAYLOAD || capacity < TN_MAX_WIRE((size_t)length)) return 0;
  scratch[0] = TN_VERSION;
  scratch[1] = type;
  put16(scratch + 2, sequence);
  put16(scratch + 4, length);
  if (length) memcpy(scratch + 6, payload, length);
  put32(scratch + 6 + length, tn_crc32(scratch, 6u + length));
  size_t written = tn_cobs_encode(scratch, 10u + length, out);
  out[written++] = 0x00;
  return written;
}

size_t tn_hello_payload(const char *device_id, const char *firmware, uint8_t channels, uint32_t rate_millihertz,
                        uint8_t format, uint8_t *out, size_t capacity) {
  size_t id_len = strlen(device_id), fw_len = strlen(firmware);
  size_t need = 1 + id_len + 1 + fw_len + 1 + 4 + 1;
  if (id_len > 255 || fw_len > 255 || need > capacity) return 0;
  size_t p = 0;
  out[p++] = (uint8_t)id_len;
  memcpy(out + p, device_id, id_len);
  p += id_len;
  out[p++] = (uint8_t)fw_len;
  memcpy(out + p, firmware, fw_len);
  p += fw_len;
  out[p++] = channels;
  put32(out + p, rate_millihertz);
  p += 4;
  out[p++] = format;
  return p;
}

size_t tn_samples_payload(uint64_t first_sample, uint16_t count, uint8_t channels, uint8_t format,
                          const void *interleaved, uint8_t *out, size_t capacity) {
  size_t size = format == TN_INT8 ? 1 : format == TN_INT16 ? 2 : 4;
  size_t data = (size_t)count * channels * size;
  if (12 + data > capacity) return 0;
  put64(out, first_sample);
  put16(out + 8, count);
  out[10] = channels;
  out[11] = format;
  /* Samples are sent little endian; every supported MCU (Cortex-M, RP2040, ESP32) is little endian. */
  memcpy(out + 12, interleaved, data);
  return 12 + data;
}
