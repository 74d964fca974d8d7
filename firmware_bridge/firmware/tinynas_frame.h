/* tinynas serial frame encoder for sensor front-ends (protocol version 1, see PROTOCOL.md).
 * Freestanding C99: no heap, no libc beyond <stdint.h>/<stddef.h>/<string.h>. */
#ifndef TINYNAS_FRAME_H_
#define TINYNAS_FRAME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TN_VERSION 1u
#define TN_MAX_PAYLOAD 4096u
/* Worst case wire size of a frame with `n` payload bytes: header 6 + CRC 4, COBS overhead, delimiter. */
#define TN_MAX_WIRE(n) ((n) + 10u + ((n) + 10u) / 254u + 2u)

enum tn_type { TN_HELLO = 1, TN_SAMPLES = 2, TN_MARK = 3, TN_PING = 4, TN_PONG = 5, TN_ERROR = 6, TN_TEST = 7 };
/* HELLO capability bits: one byte appended after tn_hello_payload's payload (absent means none). TN_CAN_TEST: the
 * front-end also runs a model and answers the test firmware's commands (tinynas hil) in TN_TEST frames. */
#define TN_CAN_TEST 1u
enum tn_format { TN_INT8 = 1, TN_INT16 = 2, TN_FLOAT32 = 3 };

/* CRC-32/IEEE (same as zlib.crc32), bitwise: small code, no table. */
uint32_t tn_crc32(const uint8_t *data, size_t length);

/* COBS-encode `length` bytes into `out` (no delimiter); returns bytes written. */
size_t tn_cobs_encode(const uint8_t *data, size_t length, uint8_t *out);

/* Encode one frame (body, CRC, COBS, 0x00 delimiter) into `out` of `capacity` bytes.
 * `scratch` must hold length + 10 bytes. Returns the wire size, or 0 if it does not fit. */
size_t tn_encode_frame(uint8_t type, uint16_t sequence, const uint8_t *payload, uint16_t length,
                       uint8_t *scratch, uint8_t *out, size_t capacity);

/* Payload builders; each returns the payload size (0 if `capacity` is too small). */
size_t tn_hello_payload(const char *device_id, const char *firmware, uint8_t channels, uint32_t rate_millihertz,
                        uint8_t format, uint8_t *out, size_t capacity);
size_t tn_samples_payload(uint64_t first_sample, uint16_t count, uint8_t channels, uint8_t format,
                          const void *interleaved, uint8_t *out, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* TINYNAS_FRAME_H_ */
