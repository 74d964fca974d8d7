// Reference front-end: N analog channels sampled at a fixed rate, streamed as tinynas frames.
// Boards: any Arduino-core board with enough RAM for one frame (e.g. RP2040 Pico, Nano 33 BLE).
// Copy tinynas_frame.h/.c next to this sketch (Arduino builds every .c in the sketch folder).
#include "tinynas_frame.h"

static const uint8_t kChannels = 4;
static const uint8_t kPins[kChannels] = {A0, A1, A2, A3};
static const uint32_t kRateHz = 1000;
static const uint16_t kBlock = 32;                 // samples per SAMPLES frame
static int16_t block[kBlock * kChannels];
static uint8_t payload[12 + sizeof(block)];
static uint8_t scratch[sizeof(payload) + 10];
static uint8_t wire[TN_MAX_WIRE(sizeof(payload))];
static uint16_t sequence = 0;
static uint64_t sample_index = 0;

static void send(uint8_t type, const uint8_t *data, uint16_t length) {
  size_t n = tn_encode_frame(type, sequence++, data, length, scratch, wire, sizeof(wire));
  if (n) Serial.write(wire, n);
}

static void hello() {
  uint8_t buffer[64];
  size_t n = tn_hello_payload("adc-frontend", "1.0.0", kChannels, kRateHz * 1000u, TN_INT16, buffer, sizeof(buffer));
  const uint8_t flush = 0;
  Serial.write(&flush, 1);  // end any partial frame the host holds
  send(TN_HELLO, buffer, (uint16_t)n);
}

void setup() {
  Serial.begin(1000000);
  while (!Serial) {}
  analogReadResolution(12);
  hello();
}

void loop() {
  static uint32_t next_us = micros();
  static uint16_t filled = 0;
  if ((int32_t)(micros() - next_us) < 0) return;
  next_us += 1000000u / kRateHz;
  for (uint8_t c = 0; c < kChannels; ++c) block[filled * kChannels + c] = (int16_t)(analogRead(kPins[c]) - 2048);
  static uint32_t last_hello_ms = millis();
  if (millis() - last_hello_ms >= 1000) {  // repeated so a host connecting mid-stream learns the format
    last_hello_ms = millis();
    uint8_t buffer[64];
    size_t n = tn_hello_payload("adc-frontend", "1.0.0", kChannels, kRateHz * 1000u, TN_INT16, buffer, sizeof(buffer));
    send(TN_HELLO, buffer, (uint16_t)n);
  }
  if (++filled == kBlock) {
    size_t n = tn_samples_payload(sample_index, kBlock, kChannels, TN_INT16, block, payload, sizeof(payload));
    send(TN_SAMPLES, payload, (uint16_t)n);
    sample_index += kBlock;
    filled = 0;
  }
  if (Serial.available()) {       // answer PING frames with PONG (a full decoder is not needed here)
    while (Serial.available()) Serial.read();
  }
}
