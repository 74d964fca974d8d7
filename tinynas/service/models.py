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

from firmware_bridge.safe_read import plain_name, read_regular
from tinynas.anomaly.section import classical_summary, read_section
from tinynas.atomic import atomic_write_text
from tinynas.card import ModelCard, read_card
from tinynas.data.windows import readable
from tinynas.deploy.bundle import firmware_zip
from tinynas.errors import TinynasError, UsageError
from tinynas.folders import (
    CARD,
    COMPILED_C,
    COMPILED_H,
    FIRMWARE_ZIP,
    MODEL,
    MODEL_C,
    MODEL_H,
    PREPARE_C,
    FolderError,
    read_model_file,
)
from tinynas.hil.build import bundle_files
from tinynas.service.state import Deployed

DEPLOYMENT_FILE = "deployment.json"
MAX_DEPLOYMENT_BYTES = 1 << 20
"""deployment.json is a few hundred bytes."""
HISTORY_LIMIT = 50
"""Entries of `state.history` kept: enough to roll back through a day of switching."""


def write_deployment(folder: Path, deployed: Deployed) -> None:
    """Write what serving `folder`'s model puts in `state.deployed` (atomically)."""
    atomic_write_text(Path(folder) / DEPLOYMENT_FILE, json.dumps(deployed.to_dict(), indent=2) + "\n")


@dataclass(frozen=True)
class StoredModel:
    """One deployed model folder of one user (or a damaged one, listed with why and never served)."""

    user: str
    id: str
    folder: Path
    deployed: Deployed | None
    """What serving it puts in `state.deployed` (rebuilt from the card for folders older than deployment.json);
    None for a damaged folder."""
    card: ModelCard | None
    damaged: str = ""
    """Why the folder cannot be served ("" when it can): its card, its deployment.json or its model at fault."""

    @property
    def made(self) -> float:
        made = self.deployed.made if self.deployed is not None else None
        if isinstance(made, (int, float)):
            return float(made)
        try:
            return self.folder.stat().st_mtime
        except OSError:
            return 0.0

    def summary(self, served: Deployed | None) -> dict:
        """JSON-ready: what `tinynas service models` and the page list (names as printable text: a folder's name is
        anyone's bytes)."""
        base = {"user": readable(self.user), "id": readable(self.id), "folder": readable(str(self.folder)),
                "made": self.made}
        if self.deployed is None or self.card is None:
            return {**base, "damaged": self.damaged, "task": None, "accuracy": None, "held_out": {},
                    "runtime": None, "ram_bytes": None, "architecture": None, "changed_by": "", "served": False}
        cost = self.card.cost_estimate or {}
        held = self.deployed.held_out or self.card.int8_test or {}
        summary = {**base, "task": self.deployed.task, "accuracy": self.deployed.accuracy,
                   "held_out": {key: held[key] for key in ("hits", "windows", "interval", "measure", "unit",
                                                             "window_hits", "window_count") if key in held},
                   "runtime": self.card.runtime, "ram_bytes": cost.get("peak_ram_bytes"),
                   "architecture": readable(self.card.name) if self.card.name else None,
                   "changed_by": self.deployed.changed_by or "",
                   "served": served is not None and served.model == self.deployed.model}
        try:  # a folder serving the classical scorer is listed as what it serves, not as its network finalist
            classical = classical_summary(read_section({"anomaly": self.card.anomaly})) if self.card.anomaly else None
        except TinynasError:
            classical = None
        if classical is not None:
            kept = len(classical["conditions"])
            summary.update(architecture=classical["name"] + (f", {kept} conditions" if kept else ""),
                           runtime=classical["runtime"], ram_bytes=classical["ram_bytes"], held_out={})
        return summary


def _from_card(user: str, folder: Path, card: ModelCard) -> dict:
    """`state.deployed` for a folder deployed before deployment.json existed: what its card says."""
    deployed = {"user": user, "model": str(folder / MODEL), "card": str(folder / CARD),
                "accuracy": card.int8_test_accuracy, "classes": card.classes,
                "card_int8_test_accuracy": card.int8_test_accuracy}
    if isinstance(card.int8_test, dict):
        deployed["held_out"] = card.int8_test
    anomaly = card.anomaly
    if isinstance(anomaly, dict):
        serving = card.serving or {}
        served = read_section({"anomaly": anomaly})  # the served family's figures (a classical scorer's own)
        assert served is not None
        deployed.update(task="anomaly", accuracy=None,
                        anomaly={"threshold": served.threshold, "threshold_steps": served.threshold_steps,
                                 "false_alarm_rate": served.false_alarm_rate,
                                 "calibration_windows": served.calibration_windows,
                                 # a folder `tinynas search --task anomaly` made has none: the service's own
                                 # alarm_k of alarm_n raises its alarm (status.alarm_status says which)
                                 "alarm": serving.get("alarm") or {}})
    elif isinstance(card.serving, dict):
        deployed["serving"] = card.serving
    return deployed


def open_model(profiles: Path, user: str, model_id: str) -> StoredModel | None:
    """The deployed model `model_id` of `user`: None when there is no such folder (or a staging folder, or a name
    that is not a plain one), a StoredModel with `damaged` saying why when its card, its deployment.json or its
    model cannot be trusted (the model folder is input like any other: checked whole, `tinynas.card.read_card`)."""
    if not plain_name(model_id) or not plain_name(user):
        return None
    folder = profiles / user / "deployed" / model_id
    if not folder.is_dir():
        return None
    try:
        if folder.is_symlink():  # tinynas writes no links: one here could lead anywhere
            raise FolderError(f"{folder} is a symbolic link, not a model folder tinynas deployed")
        card = read_card(folder)
        model = folder / MODEL
        if model.is_symlink() or not model.is_file():
            raise FolderError(f"{model}: {'a symbolic link' if model.is_symlink() else 'missing'}, not the "
                              f"folder's own model")
        try:
            raw = read_regular(folder / DEPLOYMENT_FILE, MAX_DEPLOYMENT_BYTES, "deployment record",
                               follow_links=False)
        except FileNotFoundError:
            deployed = _from_card(user, folder, card)
        except OSError as exc:
            raise FolderError(f"{folder / DEPLOYMENT_FILE}: cannot read it ({exc.strerror or exc})") from None
        else:
            try:
                deployed = json.loads(raw, parse_constant=_no_constant)
            except (ValueError, RecursionError):
                raise FolderError(f"{folder / DEPLOYMENT_FILE}: not JSON (damaged?)") from None
        if not isinstance(deployed, dict):
            raise FolderError(f"{folder / DEPLOYMENT_FILE}: not a deployment record")
        # Paths as the folder is now (a data_dir moved or restored from a backup still serves from where it is).
        try:
            record = Deployed.from_dict({**deployed, "user": user, "model": str(folder / MODEL),
                                         "card": str(folder / CARD)})
        except ValueError as exc:  # DamagedState
            raise FolderError(f"{folder / DEPLOYMENT_FILE}: {exc}") from None
    except FolderError as exc:
        # Said within the folder (the list already names it): "card.json: the card's 'cost_estimate' must be ..."
        return StoredModel(user, model_id, folder, None, None, damaged=readable(str(exc).replace(f"{folder}/", "")))
    return StoredModel(user, model_id, folder, record, card)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number")


def stored_models(profiles: Path, user: str | None = None) -> list[StoredModel]:
    """Every deployed model folder (of one user, or of all), oldest first; damaged ones included, marked."""
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
    every = stored_models(profiles, user)
    models = [model for model in every if not model.damaged]
    if not models:
        damaged = f" ({len(every)} damaged: {every[-1].damaged})" if every else ""
        raise UsageError(f"{user} has no deployed model on this device{damaged} (tinynas service models{hint} lists "
                         f"them)")
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
        raise UsageError(f"{user} has no model {readable(model_id)!r} (theirs: {ids})")
    if model.damaged:
        raise UsageError(f"{user}'s model {model_id} cannot be served: {model.damaged}")
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
    has no such file. The folder is checked whole first (`read_card`) and the file read as a model folder's own
    (a regular file, no link): a damaged folder is one line (FolderError / BundleError), nothing outside it is
    ever sent."""
    if name not in DOWNLOADS or deployed is None:
        return None
    folder = Path(deployed.model).parent
    filename = f"{deployed.user}-{folder.name}-{name}"
    if name == FIRMWARE_ZIP:
        return firmware_zip(folder, *bundle_files(folder)), DOWNLOADS[name], filename
    if not (folder / name).is_file() and not (folder / name).is_symlink():
        return None
    read_card(folder)  # a damaged card: the folder is not served, nor are its files
    return read_model_file(folder, name), DOWNLOADS[name], filename
