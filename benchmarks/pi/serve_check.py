"""The serving path on replayed windows: LiveClassifier over a sample ring, as the service runs it.

    python benchmarks/pi/serve_check.py MODEL_DIR DATA_SPEC OUT.json

Feeds every recording of DATA_SPEC, sample block by sample block, through the service's
`LiveClassifier` (LiteRT, the card's preprocessing) and writes the predicted class of every window
to OUT.json. Run on x86_64 and under emulated aarch64 by `emulated_run.sh`, which compares the two.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import numpy as np

from firmware_bridge.protocol import Samples
from firmware_bridge.ring import SampleRing
from tinynas.data.spec import load_windows
from tinynas.service.inference import LiveClassifier


def main() -> int:
    model_dir, spec, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    card = json.loads((model_dir / "card.json").read_text())
    windows = load_windows(spec)
    predictions = []
    for group in sorted(set(windows.groups)):
        stream = np.concatenate(windows.x[windows.groups == group])
        ring = SampleRing(windows.channels, len(stream))
        live = LiveClassifier(model_dir / "model.tflite", card, ring, hop_samples=windows.window_length,
                              smoothing=1)
        for start in range(0, len(stream), 16):  # blocks of 16 samples, as SAMPLES messages arrive
            ring.add(Samples(start, stream[start:start + 16]))
            predictions += [p.label for p in live.step()]
    out.write_text(json.dumps({"machine": platform.machine(), "windows": len(windows),
                               "predictions": predictions}) + "\n")
    print(f"{platform.machine()}: {len(predictions)} windows classified through the serving path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
