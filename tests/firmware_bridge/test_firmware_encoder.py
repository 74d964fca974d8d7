"""The C frame encoder, built with the host's cc, against the shared test vectors."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware_bridge" / "firmware"


@pytest.fixture(scope="module")
def vectors():
    return json.loads((FIRMWARE / "test_vectors.json").read_text())


def test_committed_vectors_are_what_the_python_encoder_produces(vectors):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_vectors", FIRMWARE / "make_vectors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.vectors() == vectors


@pytest.fixture(scope="module")
def encoder_binary(vectors, tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler (cc) on PATH")
    folder = tmp_path_factory.mktemp("firmware")
    cases = []
    for number, vector in enumerate(vectors):
        payload = bytes.fromhex(vector["payload"])
        body = ", ".join(f"0x{b:02x}" for b in payload) or "0"
        cases.append(f"static const uint8_t p{number}[] = {{{body}}};\n")
    calls = "".join(
        f"  emit({v['type']}, {v['sequence']}, p{i}, {len(bytes.fromhex(v['payload']))});\n"
        for i, v in enumerate(vectors))
    samples = vectors[1]
    samples_payload = bytes.fromhex(samples["payload"])
    data = ", ".join(f"0x{b:02x}" for b in samples_payload[12:])
    (folder / "main.c").write_text(f"""
#include <stdio.h>
#include <string.h>
#include "tinynas_frame.h"
{''.join(cases)}
static uint8_t scratch[TN_MAX_PAYLOAD + 10], wire[TN_MAX_WIRE(TN_MAX_PAYLOAD)];
static void hex(const uint8_t *b, size_t n) {{ for (size_t i = 0; i < n; ++i) printf("%02x", b[i]); printf("\\n"); }}
static void emit(uint8_t type, uint16_t seq, const uint8_t *payload, uint16_t n) {{
  hex(wire, tn_encode_frame(type, seq, payload, n, scratch, wire, sizeof(wire)));
}}
int main(void) {{
{calls}
  uint8_t out[512];
  hex(out, tn_hello_payload("adc-frontend", "1.0.0", 4, 1000000u, TN_INT16, out, sizeof(out)));
  static const uint8_t data[] = {{{data}}};
  hex(out, tn_samples_payload(0, 32, 4, TN_INT16, data, out, sizeof(out)));
  printf("%s\\n", tn_encode_frame(TN_PING, 0, out, 4, scratch, wire, 5) == 0 ? "refused" : "overflow");
  return 0;
}}
""")
    binary = folder / "vectors"
    subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-I", str(FIRMWARE),
                    str(folder / "main.c"), str(FIRMWARE / "tinynas_frame.c"), "-o", str(binary)], check=True)
    return binary


def test_c_encoder_output_equals_python_for_every_vector(vectors, encoder_binary):
    lines = subprocess.run([str(encoder_binary)], capture_output=True, text=True, check=True).stdout.split()
    assert lines[:len(vectors)] == [v["wire"] for v in vectors]


def test_c_payload_builders_match_python(vectors, encoder_binary):
    lines = subprocess.run([str(encoder_binary)], capture_output=True, text=True, check=True).stdout.split()
    assert lines[len(vectors)] == vectors[0]["payload"]
    assert lines[len(vectors) + 1] == vectors[1]["payload"]
    assert lines[len(vectors) + 2] == "refused"  # a frame that does not fit the buffer is not written
