"""The service's side threads, each a loop until the service stops: the device stream reader, live
inference, the status file writer and the stop-request watcher.

The state machine runs in the main thread (`Service._loop`); these only read its state, except the
inference loop, which records why a deployed model cannot be served in `state.error`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from firmware_bridge.protocol import Samples
from tinynas.atomic import atomic_write_text
from tinynas.service.inference import LiveClassifier

if TYPE_CHECKING:
    from tinynas.service.runner import Service

log = logging.getLogger(__name__)


def read_stream(service: Service) -> None:
    """Hand every sample chunk to the ring (live inference) and every message to the recorder, if one runs."""
    while not service._stop.is_set():
        message = service.link.get(timeout=0.1)
        if message is None:
            continue
        if isinstance(message, Samples):
            service.ring.add(message)
        recorder = service.recorder
        if recorder is not None:
            recorder.handle(message)


def serve(service: Service) -> None:
    """Live inference with whatever verified model is deployed (swapped when a new one is)."""
    loaded = None
    while not service._stop.wait(max(0.02, service.config.hop_seconds / 2)):
        deployed = service.state.deployed
        if deployed.get("model") != loaded:
            loaded = deployed.get("model")
            service.classifier = None
            if loaded:
                try:
                    card = json.loads(Path(deployed["card"]).read_text())
                    hop = int(round(service.config.hop_seconds * service.hello.sample_rate_hz))
                    service.classifier = LiveClassifier(loaded, card, service.ring, hop, service.config.smoothing)
                except Exception as exc:  # noqa: BLE001 - a damaged model must not end serving for good
                    log.error("cannot serve %s: %s", loaded, exc)
                    service.state.error = f"cannot serve {loaded}: {exc}; onboard again to deploy a new model"
                    continue
                log.info("serving %s (int8 accuracy %.3f)", loaded, deployed.get("accuracy", float("nan")))
        if service.classifier is not None:
            service.predictions.write(service.classifier.step())


def write_status(service: Service) -> None:
    """Write the status snapshot to `status.json` twice a second (what `tinynas service status` reads)."""
    while not service._stop.wait(0.5):
        try:
            atomic_write_text(service.paths.status, json.dumps(service.status()) + "\n")
        except OSError as exc:
            log.warning("cannot write status: %s", exc)


def watch_requests(service: Service) -> None:
    """Turn a stop request into SIGTERM, so that it stops the service as systemd does, from any phase."""
    requests = service.paths.requests
    while not service._stop.wait(0.2):
        for path in sorted(requests.glob("*-stop.json")) if requests.exists() else []:
            path.unlink(missing_ok=True)
            log.info("stop requested")
            os.kill(os.getpid(), signal.SIGTERM)


SIDE_THREADS = (read_stream, serve, write_status, watch_requests)
