"""The users' models on the device: every model ever deployed stays in its user's folder, and any can be served again.

Onboarding a second user used to leave the first with no way back short of onboarding again, although their model
was still on disk. Each deployed model folder (`profiles/<user>/deployed/<id>/`) now also holds `deployment.json`:
what `state.deployed` holds while it is served (accuracy with its held-out count, the serving rule, the plan and
session it came from). `tinynas service models` lists the folders; `tinynas serve --user U [--model ID |
--previous]` asks the service to serve one (`serve_request`); nothing is ever deleted by a switch.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from tinynas.atomic import atomic_write_text
from tinynas.errors import UsageError
from tinynas.folders import CARD, COMPILED_C, COMPILED_H, FIRMWARE_ZIP, MODEL, MODEL_C, MODEL_H, PREPARE_C
from tinynas.service.state import Deployed

DEPLOYMENT_FILE = "deployment.json"
HISTORY_LIMIT = 50
"""Entries of `state.history` kept: enough to roll back through a day of switching."""


def write_deployment(folder: Path, deployed: Deployed) -> None:
    """Write what serving `folder`'s model puts in `state.deployed` (atomically)."""
    atomic_write_text(Path(folder) / DEPLOYMENT_FILE, json.dumps(deployed.to_dict(), indent=2) + "\n")


@dataclass(frozen=True)
class StoredModel:
    """One deployed model folder of one user."""

    user: str
    id: str
    folder: Path
    deployed: Deployed
    """What serving it puts in `state.deployed` (rebuilt from the card for folders older than deployment.json)."""
    card: dict

    @property
    def made(self) -> float:
        made = self.deployed.made
        return float(made) if isinstance(made, (int, float)) else (self.folder / CARD).stat().st_mtime

    def summary(self, served: Deployed | None) -> dict:
        """JSON-ready: what `tinynas service models` and the page list."""
        cost = self.card.get("cost_estimate") or {}
        held = self.deployed.held_out or self.card.get("int8_test") or {}
        return {"user": self.user, "id": self.id, "folder": str(self.folder), "made": self.made,
                "task": self.deployed.task, "accuracy": self.deployed.accuracy,
                "held_out": {key: held[key] for key in ("hits", "windows", "interval") if key in held},
                "runtime": self.card.get("runtime", "tflm"), "ram_bytes": cost.get("peak_ram_bytes"),
                "architecture": self.card.get("name"), "changed_by": self.deployed.changed_by or "",
                "served": served is not None and served.model == self.deployed.model}


def _from_card(user: str, folder: Path, card: dict) -> dict:
    """`state.deployed` for a folder deployed before deployment.json existed: what its card says."""
    deployed = {"user": user, "model": str(folder / MODEL), "card": str(folder / CARD),
                "accuracy": card.get("int8_test_accuracy"), "classes": card.get("classes"),
                "card_int8_test_accuracy": card.get("int8_test_accuracy")}
    if isinstance(card.get("int8_test"), dict):
        deployed["held_out"] = card["int8_test"]
    anomaly = card.get("anomaly")
    if isinstance(anomaly, dict):
        serving = card.get("serving") or {}
        deployed.update(task="anomaly", accuracy=None,
                        anomaly={"threshold": anomaly.get("threshold"),
                                 "threshold_steps": anomaly.get("threshold_steps"),
                                 "false_alarm_rate": anomaly.get("false_alarm_rate"),
                                 "calibration_windows": (anomaly.get("calibration") or {}).get("calibration_windows"),
                                 "alarm": serving.get("alarm") or {}})
    elif isinstance(card.get("serving"), dict):
        deployed["serving"] = card["serving"]
    return deployed


def open_model(profiles: Path, user: str, model_id: str) -> StoredModel | None:
    """The deployed model `model_id` of `user`, None when there is no such complete folder (a staging folder, a
    folder without its model or card, or one whose files cannot be read)."""
    if not model_id or model_id.startswith(".") or "/" in model_id:
        return None
    folder = profiles / user / "deployed" / model_id
    try:
        card = json.loads((folder / CARD).read_text(encoding="utf-8"))
        if not (folder / MODEL).is_file() or not isinstance(card, dict):
            return None
        try:
            deployed = json.loads((folder / DEPLOYMENT_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            deployed = _from_card(user, folder, card)
        if not isinstance(deployed, dict):
            return None
        # Paths as the folder is now (a data_dir moved or restored from a backup still serves from where it is).
        record = Deployed.from_dict({**deployed, "user": user, "model": str(folder / MODEL),
                                     "card": str(folder / CARD)})
    except (OSError, ValueError):  # DamagedState is a ValueError: a deployment.json edited by hand
        return None
    return StoredModel(user, model_id, folder, record, card)


def stored_models(profiles: Path, user: str | None = None) -> list[StoredModel]:
    """Every complete deployed model folder (of one user, or of all), oldest first."""
    users = [user] if user else sorted(p.name for p in profiles.glob("*") if p.is_dir()) if profiles.is_dir() else []
    found = []
    for name in users:
        folder = profiles / name / "deployed"
        for model_folder in sorted(folder.glob("*")) if folder.is_dir() else []:
            model = open_model(profiles, name, model_folder.name)
            if model is not None:
                found.append(model)
    return sorted(found, key=lambda model: (model.made, model.id))


def by_user(models: list[StoredModel]) -> list[StoredModel]:
    """`models` grouped by user (in name order), each user's oldest first: how `tinynas service models` lists them."""
    return sorted(models, key=lambda model: (model.user, model.made, model.id))


def remember(history: list, deployed: Deployed | None) -> list:
    """`state.history` after `deployed` started serving (newest last, HISTORY_LIMIT entries)."""
    if deployed is None:
        return history
    entry = {"user": deployed.user, "id": deployed.id, "at": round(time.time(), 3)}
    if history and {k: history[-1].get(k) for k in ("user", "id")} == {k: entry[k] for k in ("user", "id")}:
        return history
    return (list(history) + [entry])[-HISTORY_LIMIT:]


def previous_id(history: list, user: str, served: Deployed | None) -> str | None:
    """The model of `user` served before the one now served for them (None when there was none)."""
    current = served.id if served is not None and served.user == user else None
    entries = [entry.get("id") for entry in history if isinstance(entry, dict) and entry.get("user") == user]
    if current is None:
        return entries[-1] if entries else None
    for model_id in reversed(entries):
        if model_id != current:
            return model_id
    return None


def choose(profiles: Path, user: str, model_id: str | None, previous: bool, history: list,
           served: Deployed | None, hint: str = "") -> StoredModel:
    """The model `tinynas serve` asks for: `model_id`, the user's previous one, or their newest; UsageError in
    one line when there is none (`hint`: the --config the commands it names need)."""
    models = stored_models(profiles, user)
    if not models:
        raise UsageError(f"{user} has no deployed model on this device (tinynas service models{hint} lists them)")
    if previous:
        model_id = previous_id(history, user, served)
        if model_id is None:
            raise UsageError(f"{user} has no previous model to roll back to (tinynas service models{hint} lists "
                             f"theirs)")
    if model_id is None:
        return models[-1]
    model = open_model(profiles, user, model_id)
    if model is None:
        ids = ", ".join(m.id for m in models)
        raise UsageError(f"{user} has no model {model_id!r} (theirs: {ids})")
    return model


DOWNLOADS = {MODEL: "application/octet-stream", MODEL_C: "text/x-c", MODEL_H: "text/x-c",
             COMPILED_C: "text/x-c", COMPILED_H: "text/x-c",
             PREPARE_C: "text/x-c", CARD: "application/json",
             FIRMWARE_ZIP: "application/zip"}
"""What the page offers of the served model: its files, and the firmware bundle (`tinynas.deploy.bundle`)."""


def download_names(folder: Path) -> list[str]:
    """The DOWNLOADS a model folder has, the firmware bundle first (it needs the C runtime's files): the page lists
    these, so a model made before a file existed (model_prepare.c) offers no dead link."""
    present = [name for name in DOWNLOADS if name != FIRMWARE_ZIP and (folder / name).is_file()]
    return ([FIRMWARE_ZIP] if COMPILED_C in present else []) + present


def served_download(deployed: Deployed | None, name: str) -> tuple[bytes, str, str] | None:
    """(content, type, file name) of one of the served model's DOWNLOADS; None when nothing is served or the model
    has no such file (BundleError in one line when it has no C runtime to bundle)."""
    if name not in DOWNLOADS or deployed is None:
        return None
    folder = Path(deployed.model).parent
    filename = f"{deployed.user}-{folder.name}-{name}"
    if name == FIRMWARE_ZIP:
        from tinynas.deploy.bundle import firmware_zip

        return firmware_zip(folder), DOWNLOADS[name], filename
    try:
        return (folder / name).read_bytes(), DOWNLOADS[name], filename
    except OSError:
        return None
