"""Write test_vectors.json: frames the Python encoder produces, which the C encoder must match.

    python firmware_bridge/firmware/make_vectors.py
"""

import json
import sys
from pathlib import Path

import numpy as np

from firmware_bridge.protocol import Hello, Mark, Message, Ping, Samples, encode_frame, encode_payload


def vectors() -> list[dict]:
    """The shared vectors: message type, sequence, payload and the expected wire bytes (hex)."""
    rng = np.random.default_rng(2026)
    messages: list[tuple[int, Message]] = [
        (0, Hello("adc-frontend", "1.0.0", 4, 1000.0, "int16")),
        (1, Samples(0, rng.integers(-2048, 2048, size=(32, 4)).astype(np.int16))),
        (2, Samples(2**33 + 5, rng.integers(-128, 128, size=(50, 8)).astype(np.int8))),
        (65535, Ping(0)),
        (7, Mark(12, 0, "")),
        (8, Samples(1, np.zeros((200, 2), dtype=np.int8))),      # long zero runs
        (9, Samples(2, np.full((150, 2), 7, dtype=np.int8))),    # a 300+ byte block without zeros
    ]
    out = []
    for sequence, message in messages:
        kind, payload = encode_payload(message)
        out.append({"type": int(kind), "sequence": sequence, "payload": payload.hex(),
                    "wire": encode_frame(message, sequence).hex(), "message": type(message).__name__})
    return out


if __name__ == "__main__":
    path = Path(__file__).with_name("test_vectors.json")
    path.write_text(json.dumps(vectors(), indent=1) + "\n")
    print(f"wrote {path}", file=sys.stderr)
