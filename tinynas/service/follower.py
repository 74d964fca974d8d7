"""The service's counterpart in simulation: a simulated person or machine that follows the status page.

`Follower` polls the service's /status.json and does what its prompts ask: a person (firmware_bridge/person.py)
reacts to each GO with a sign, puts the armband on again when asked, and continues a paused collection; a machine
runs in the prompted state and confirms each block as an operator would (`tinynas onboard --continue`), and may
run on (then fail) while a model is served. `tinynas simulate --person` / `--machine` runs one; the service's
end-to-end tests drive it too.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path

from firmware_bridge.person import Machine, Person
from tinynas.service.runner import request
from tinynas.service.state import REWEAR_RUNNING, Phase

log = logging.getLogger("tinynas")

POLL_SECONDS = 0.05
"""How often the simulated person looks at the status (a page polls less often; the person's reaction is
counted from the service's GO time, so this only bounds how late a reaction can start)."""
SAY_AGAIN_SECONDS = 30.0
"""How often the follower repeats that it still cannot read the status: a person left waiting in silence thinks it
is working."""


class Follower:
    """Reads the service's status and makes the person or machine do what it prompts."""

    def __init__(self, url: str, token: str, source, data_dir: Path | None, log_path: Path | None,
                 simulator=None, serving_check: bool = False, serve_state: str | None = None,
                 fault: str | None = None, fault_after: float = 60.0) -> None:
        self.url = url + (("&" if "?" in url else "?") + f"token={token}" if token else "")
        self.source = source
        self.data_dir = data_dir
        self.log_path = log_path
        self.acted: float | None = None
        self.confirmed: float | None = None
        self.continued_pause = ""
        self.unreachable_since: float | None = None
        self.unreadable_why = ""  # what was said about the status that cannot be read, and when
        self.said_at = 0.0
        self.simulator = simulator
        self.serving_check = serving_check
        self.next_sign_at = 0.0
        self.logged_played = 0
        self.warned: set[str] = set()
        self.serve_state, self.fault, self.fault_after = serve_state, fault, fault_after
        self.serving_since: float | None = None
        self.answered_more = ""  # the gate outcome whose "record N more" was followed (once per outcome)

    def source_names(self) -> set[str]:
        """The signs the person knows or the states the machine has."""
        return set(self.source.states if isinstance(self.source, Machine) else self.source.signs)

    def status(self) -> dict:
        """The service's status, or {} while it cannot be read (the person looks again, as at a page that did not
        load), saying why once per reason and again every SAY_AGAIN_SECONDS while it lasts."""
        try:
            with urllib.request.urlopen(self.url, timeout=2) as answer:
                status = json.loads(answer.read())
            if not isinstance(status, dict) or "state" not in status:
                raise ValueError("no state in it")
        except urllib.error.HTTPError as exc:  # an answer, but a refusal: waiting will not change it
            why = ("refused without the right token: give --token or the service's --config"
                   if exc.code in (401, 403) else f"answered HTTP {exc.code}: is it tinynas's status endpoint?")
            return self._unreadable(why)
        except ValueError:
            return self._unreadable("answered, but not with tinynas's status: is the address the status page's?")
        except (OSError, http.client.HTTPException):
            # HTTPException: a service killed or restarted mid-answer (IncompleteRead, BadStatusLine), which is
            # not an OSError.
            return self._unreadable("not reachable yet (is `tinynas service run` up?)")
        if self.unreachable_since is not None:
            log.info("status endpoint %s read: following it", self.url.split("?")[0])  # never the token
        self.unreachable_since, self.unreadable_why, self.said_at = None, "", 0.0
        return status

    def _unreadable(self, why: str) -> dict:
        now = time.monotonic()
        if self.unreachable_since is None:
            self.unreachable_since = now
        if why != self.unreadable_why or now - self.said_at >= SAY_AGAIN_SECONDS:
            waited = f" (for {now - self.unreachable_since:.0f} s)" if now - self.unreachable_since >= 1 else ""
            log.warning("status endpoint %s %s%s", self.url.split("?")[0], why, waited)
            self.unreadable_why, self.said_at = why, now
        return {}

    def note(self, event: dict) -> None:
        """Append what was done to the log file (JSON lines), if there is one."""
        if self.log_path is not None:
            with open(self.log_path, "a", encoding="utf-8") as file:
                file.write(json.dumps({"time": round(time.time(), 3), **event}) + "\n")

    def step(self) -> None:
        """Look at the status once and act on it."""
        status = self.status()
        collection = status.get("collection") or {}
        if self.serving_check and status.get("state") == Phase.SERVING and isinstance(self.source, Person):
            self._check_serving(status)
            return
        if self.serve_state and status.get("state") == Phase.SERVING and isinstance(self.source, Machine):
            self._serve(status)
            return
        if self.serve_state and isinstance(self.source, Machine) and \
                (status.get("rewear") or {}).get("phase") in REWEAR_RUNNING:
            # A new condition is recorded, then adapted to, while the old model serves: an operator keeps the
            # machine running as it runs now (switched off, the recording would be of a stopped machine).
            self._run(self.source.state or self.serve_state, False)
            return
        if status.get("state") != Phase.SERVING:
            self.serving_since = None
        if status.get("state") in (Phase.IDLE, Phase.SERVING) and self._record_more(status):
            return
        if status.get("state") == Phase.COLLECTING and collection.get("redon") and isinstance(self.source, Person):
            self._redon(status)
            return
        if status.get("state") != Phase.COLLECTING or not collection.get("prompt"):
            if isinstance(self.source, Machine) and self.source.state is not None and status.get("state"):
                self.source.stop()  # nothing is recorded: the operator switches the machine off
                self.note({"state": None})
            return
        if status.get("paused") or collection.get("paused"):
            self._continue_pause(status)
            return
        label = str(collection["prompt"])
        if label not in self.warned and label not in self.source_names() and label != collection.get("rest_class"):
            self.warned.add(label)  # said once: its windows will be rejected until it is mapped
            how = (f"its states: {', '.join(sorted(self.source_names()))}" if isinstance(self.source, Machine)
                   else f"map one with --signs {label}=CLASS")
            log.warning("the simulated %s cannot do %r: the data set has no such class (%s)",
                        "machine" if isinstance(self.source, Machine) else "person", label, how)
        if isinstance(self.source, Machine):
            if label in self.source.states and self.source.state != label:
                self.source.set_state(label)
                self.note({"state": label})
            key = collection.get("confirm_since")  # one confirmation per block, across service restarts
            if collection.get("phase") == "confirm" and key and self.confirmed != key:
                self.confirmed = key
                self._request("continue", status.get("user"))
                self.note({"confirmed": label})
            return
        assert isinstance(self.source, Person)
        go_at = collection.get("go_at")  # one reaction per GO, across service restarts
        if collection.get("phase") == "go" and go_at and self.acted != go_at:
            self.acted = go_at
            since = max(0.0, time.time() - float(go_at))
            done = self.source.react(label, float(collection.get("window_seconds") or 2.0), since)
            self.note({"prompt": label, "number": collection.get("number"), "attempt": collection.get("attempt"),
                       "seen_after_go": round(since, 3), **done})

    def _check_serving(self, status: dict) -> None:
        """Alternate 4 s of a known sign with 4 s of stillness; log what was played at device sample indices."""
        assert isinstance(self.source, Person) and self.simulator is not None
        now = time.monotonic()
        known = [c for c in status.get("classes") or [] if c in self.source.signs and c != self.source.rest_class]
        if known and now >= self.next_sign_at:
            sign = known[int(self.source.rng.integers(len(known)))]
            self.source.perform(sign, 0.0, 4.0)
            self.next_sign_at = now + 8.0
        # The device's index of a source sample: the simulator streams the source in order from its counter
        # (exact to one frame, the block being read as this runs).
        offset = self.source.samples_read - self.simulator.sample_index
        for sign, first, count in self.source.played[self.logged_played:]:
            self.note({"played": sign, "device_first": first - offset, "samples": count})
        self.logged_played = len(self.source.played)

    def _serve(self, status: dict) -> None:
        """While a model is served: run in the serving state, then (--fault) fail --fault-after seconds later."""
        assert isinstance(self.source, Machine) and self.serve_state is not None
        now = time.monotonic()
        if self.serving_since is None:
            self.serving_since = now
        wanted = self.fault if self.fault and now - self.serving_since >= self.fault_after else self.serve_state
        self._run(wanted, True)

    def _run(self, wanted: str, serving: bool) -> None:
        """Run the machine in state `wanted` (noted with the device's sample index it streams from)."""
        assert isinstance(self.source, Machine)
        if self.source.state != wanted:
            self.source.set_state(wanted)
            # The device's sample index from which the new state streams (to one frame).
            self.note({"state": wanted, "serving": serving,
                       "device_first": self.simulator.sample_index if self.simulator is not None else None})
            log.info("the simulated machine runs %s %s", wanted,
                     "while the model is served" if serving else "while its new condition is recorded")

    def _record_more(self, status: dict) -> bool:
        """As a person reading the page: a model the held-out windows could not judge (the gate's amber "one more
        step", tinynas.service.gate) asks for N more per class; record them, once per such outcome."""
        gate = status.get("gate") or {}
        if not isinstance(gate, dict) or gate.get("decision") != "undecided" or self.data_dir is None:
            return False
        user, more = gate.get("user"), gate.get("more_per_class")
        key = json.dumps(gate, sort_keys=True)
        if not isinstance(user, str) or not isinstance(more, int) or more < 1 or key == self.answered_more:
            return False
        self.answered_more = key
        request(self.data_dir, "onboard", user=user, more=more)
        self.note({"more": more, "user": user})
        log.info("the simulated %s records %d more per class for %s, as the service asked",
                 "machine" if isinstance(self.source, Machine) else "person", more, user)
        return True

    def _redon(self, status: dict) -> None:
        """A two-donning plan's halfway step: the person takes the armband off, puts it on again (each electrode
        a little elsewhere), and continues, as the page asks."""
        assert isinstance(self.source, Person)
        key = (status.get("collection") or {}).get("confirm_since")  # once per request, across restarts
        if not key or self.confirmed == key:
            return
        time.sleep(2.0)  # off and on again
        self.confirmed = key
        gains = self.source.redon()
        self._request("continue", status.get("user"))
        self.note({"redon": [round(float(g), 3) for g in gains]})
        log.info("the simulated person put the armband on again (channel gains %s) and continues",
                 " ".join(f"{g:.2f}" for g in gains))

    def _continue_pause(self, status: dict) -> None:
        # As a person reading the page: checks the armband (a few seconds), then continues the collection.
        paused = str(status.get("paused") or "")
        key = f"{(status.get('collection') or {}).get('paused_at')}:{paused}"
        if key == self.continued_pause or self.data_dir is None:
            return
        time.sleep(2.0)
        self.continued_pause = key
        self._request("continue", status.get("user"))
        self.note({"continued": paused})

    def _request(self, kind: str, user) -> None:
        if self.data_dir is None:
            log.warning("cannot %s the collection of %s: give --config (the service's data_dir)", kind, user)
            return
        request(self.data_dir, kind, user=user)
