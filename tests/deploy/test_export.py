import json
import subprocess

import numpy as np
import pytest

from tinynas.deploy.export import c_array_source, convert_int8
from tinynas.deploy.measure import run_int8
from tinynas.space import SpecError, as_model_input


@pytest.mark.slow
def test_int8_model_agrees_with_float_model(trained_tiny, exported_tiny, vibration_split):
    data, _, _, test = vibration_split
    _, result = trained_tiny
    _, tflite, _ = exported_tiny
    windows = np.concatenate([data.x[test], data.x])  # test windows plus every other window
    float_predictions = result.model(as_model_input(windows), training=False).numpy().argmax(axis=1)
    int8_predictions = run_int8(tflite, windows).predictions
    agreement = float(np.mean(float_predictions == int8_predictions))
    print(f"int8 vs float top-1 agreement {agreement:.3f} on {len(windows)} windows")
    assert agreement >= 0.97


def test_exported_model_is_int8_in_and_out(exported_tiny):
    from tinynas.deploy.litert import litert_interpreter

    _, tflite, _ = exported_tiny
    interpreter = litert_interpreter(tflite)
    assert interpreter.get_input_details()[0]["dtype"] == np.int8
    assert interpreter.get_output_details()[0]["dtype"] == np.int8
    weights = [t for t in interpreter.get_tensor_details() if len(t["shape"]) == 4 and t["dtype"] == np.float32]
    assert not weights, "float tensors left in a full-integer model"


def test_names_are_stripped_and_buffers_aligned(exported_tiny):
    from tensorflow.lite.python import schema_py_generated as schema

    _, tflite, _ = exported_tiny
    model = schema.Model.GetRootAsModel(tflite, 0)
    subgraph = model.Subgraphs(0)
    assert all(not subgraph.Tensors(i).Name() for i in range(subgraph.TensorsLength()))
    for i in range(model.BuffersLength()):
        buffer = model.Buffers(i)
        if buffer.DataLength():
            start = buffer._tab.Vector(buffer._tab.Offset(4))
            assert start % 16 == 0, f"buffer {i} starts at {start}"


def test_c_array_compiles_and_matches_the_tflite_bytes(exported_tiny, tmp_path, c_compiler):
    compiler = c_compiler
    _, tflite, paths = exported_tiny
    first = ", ".join(f"0x{b:02x}" for b in tflite[:16])
    (tmp_path / "main.c").write_text(f"""
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include "model.h"
static const unsigned char expected[16] = {{{first}}};
int main(void) {{
  if (model_len != {len(tflite)}u || MODEL_LEN != {len(tflite)}u) {{ puts("length"); return 1; }}
  if (memcmp(model, expected, 16) != 0) {{ puts("bytes"); return 2; }}
  if (((uintptr_t)model) % 16 != 0) {{ puts("alignment"); return 3; }}
  fwrite(model, 1, model_len, stdout);
  return 0;
}}
""")
    binary = tmp_path / "check"
    subprocess.run([compiler, "-std=c99", "-Wall", "-Werror", "-I", str(paths.header_path.parent),
                    str(tmp_path / "main.c"), str(paths.c_path), "-o", str(binary)], check=True)
    run = subprocess.run([str(binary)], capture_output=True, check=True)
    assert run.stdout == tflite == paths.tflite_path.read_bytes()


def test_model_card_records_what_was_exported(exported_tiny):
    arch, tflite, paths = exported_tiny
    card = json.loads(paths.card_path.read_text())
    assert card["architecture"] == arch.to_dict()
    assert card["quantization"]["input"]["dtype"] == "int8"
    assert card["quantization"]["input"]["shape"] == [1, 1, 512, 1]
    assert card["tools"]["tensorflow"]
    assert card["note"] == "test"


def test_c_symbol_must_be_an_identifier():
    with pytest.raises(SpecError, match="not a valid identifier"):
        c_array_source(b"TFL3", "my-model")


def test_converter_rejects_wrong_windows(trained_tiny):
    _, result = trained_tiny
    with pytest.raises(SpecError, match="have shape \\(400, 8\\) but the model expects \\(512, 1\\)"):
        convert_int8(result.model, np.zeros((4, 400, 8), np.float32))
    bad = np.zeros((4, 512, 1), np.float32)
    bad[0, 3, 0] = np.nan
    with pytest.raises(SpecError, match="NaN or inf"):
        convert_int8(result.model, bad)
