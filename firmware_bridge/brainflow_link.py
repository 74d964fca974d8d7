"""A biosignal board through BrainFlow: OpenBCI boards, OYMotion's gForce armbands, Muse and many more.

`brainflow:BOARD?option=value&...` where BOARD is a BrainFlow board name (`synthetic`, `playback_file`,
`gforce_pro`, `cyton`, ... as in `brainflow.BoardIds`, any case) or its number, and the options are
`BrainFlowInputParams` fields (`serial_port`, `mac_address`, `ip_address`, `ip_port`, `file`, `master_board`,
`serial_number`, `other_info`, `timeout`) plus `channels=emg` (default) or `channels=accel`. The board's own
description gives the channels and the rate; its package counter shows lost packets, which leave a gap on the
timeline as lost frames do. A board that stops answering is prepared again every second; what it sends then
starts a new epoch. Needs `pip install brainflow` (tinynas[sensors]).
"""

from __future__ import annotations

import platform
import time
import urllib.parse
from typing import Any

import numpy as np

from firmware_bridge.link import Link, LinkError, PolledLink
from firmware_bridge.protocol import Hello

SCHEME = "brainflow:"
POLL_SECONDS = 0.02
RETRY_SECONDS = 1.0
SILENT_SECONDS = 2.0
"""A board that sends nothing for this long has gone (BrainFlow's serial drivers retry a vanished port forever
without a word: a Cyton's dongle pulled, a board reset); it is prepared again every RETRY_SECONDS."""
_PARAMS = ("serial_port", "mac_address", "ip_address", "ip_port", "file", "master_board", "serial_number",
           "other_info", "timeout", "ip_protocol")


def is_brainflow_url(url: str) -> bool:
    return url.startswith(SCHEME)


class BrainFlowLink(PolledLink):
    """Samples of a BrainFlow board's EMG (or accelerometer) channels; the same interface as the framed Link."""

    what = "a BrainFlow board"

    def __init__(self, url: str, **kwargs) -> None:
        try:
            from brainflow.board_shim import BoardControllerDLL, BoardIds, BrainFlowInputParams
        except ImportError:
            raise LinkError(f"{url}: BrainFlow is not installed: pip install brainflow (or tinynas[sensors])") \
                from None
        try:
            BoardControllerDLL.get_instance()
        except OSError as exc:  # FileNotFoundError too: the wheel's libraries are x86_64 Linux, Windows and macOS
            raise LinkError(f"{url}: BrainFlow's library does not load on this {platform.machine()} machine "
                            f"({str(exc)[:120]}): PyPI's BrainFlow carries no Linux ARM build; build BrainFlow from "
                            f"source here (docs/collecting.md)") from None
        parts = urllib.parse.urlsplit(url[len(SCHEME):])
        name = parts.path.strip("/")
        query = dict(urllib.parse.parse_qsl(parts.query))
        kind = query.pop("channels", "emg")
        unknown = set(query) - set(_PARAMS)
        if unknown or kind not in ("emg", "accel"):
            raise LinkError(f"{url}: unknown option {sorted(unknown)[0] if unknown else 'channels=' + kind!r} "
                            f"(BrainFlow's {', '.join(_PARAMS)}, and channels=emg|accel)")
        boards = {board.name.lower(): board.value for board in BoardIds}
        board = int(name) if name.lstrip("-").isdigit() else boards.get(name.lower().removesuffix("_board"),
                                                                          boards.get(name.lower() + "_board"))
        if board is None or board not in boards.values():
            raise LinkError(f"{url}: BrainFlow knows no board {name!r} (e.g. synthetic, playback_file, gforce_pro, "
                            f"cyton)")
        params = BrainFlowInputParams()
        for key, value in query.items():
            current = getattr(params, key)
            try:
                setattr(params, key, type(current)(value) if current is not None else value)
            except ValueError:
                raise LinkError(f"{url}: {key} must be a {type(current).__name__}") from None
        super().__init__(url, **kwargs)
        self.board, self.params, self.kind = board, params, kind
        self._shim: Any = None
        self._index = 0

    def _description(self) -> tuple[int, list[int], float, int | None]:
        """(the board whose description applies, its channels' rows, its rate, its package counter's row)."""
        from brainflow.board_shim import BoardIds, BoardShim

        described = self.board
        if self.board in (BoardIds.PLAYBACK_FILE_BOARD.value, BoardIds.STREAMING_BOARD.value):
            described = int(self.params.master_board)  # a playback describes the board it recorded
        rows = (BoardShim.get_emg_channels(described) if self.kind == "emg"
                else BoardShim.get_accel_channels(described))
        try:
            package = BoardShim.get_package_num_channel(described)
        except Exception:  # noqa: BLE001 - a board without a package counter: losses are not seen
            package = None
        return described, list(rows), float(BoardShim.get_sampling_rate(described)), package

    def _start(self):
        from brainflow.board_shim import BoardShim

        BoardShim.disable_board_logger()
        shim = BoardShim(self.board, self.params)
        shim.prepare_session()
        shim.start_stream()
        return shim

    def open(self) -> Link:
        try:
            described, rows, rate, self._package = self._description()
            if not rows:
                raise LinkError(f"{self.url}: the board has no {self.kind} channels (try channels=emg or accel)")
            self._rows = rows
            self._shim = self._start()
        except LinkError:
            raise
        except Exception as exc:  # noqa: BLE001 - BrainFlowError and the library's ValueErrors: one line
            raise LinkError(f"cannot open {self.url}: {exc}") from None
        from brainflow.board_shim import BoardIds

        name = BoardIds(described).name.lower()
        self._announce(Hello(f"brainflow:{name}", "brainflow", len(rows), rate, "float32"))
        return self

    def _release(self) -> None:
        shim, self._shim = self._shim, None
        if shim is not None:
            for step in (shim.stop_stream, shim.release_session):
                try:
                    step()
                except Exception:  # noqa: BLE001 - a board already gone
                    pass

    def _poll_loop(self) -> None:
        last_package: int | None = None
        heard = time.monotonic()
        while not self._closing.wait(POLL_SECONDS):
            if self._shim is None:
                if not self._again():
                    continue
                last_package, heard = None, time.monotonic()
            try:
                data = self._shim.get_board_data()
            except Exception as exc:  # noqa: BLE001 - the board went away: prepared again every second
                self._gone(str(exc))
                continue
            if data.shape[1] == 0:
                if time.monotonic() - heard > SILENT_SECONDS:
                    self._gone(f"nothing for {SILENT_SECONDS:g} s")
                continue
            heard = time.monotonic()
            indices = np.arange(data.shape[1])
            if self._package is not None:
                packages = data[self._package].astype(np.int64)
                steps = np.diff(np.concatenate([[packages[0] - 1 if last_package is None else last_package],
                                                packages])) % 256
                steps[steps == 0] = 1
                indices = self._index - 1 + np.cumsum(steps)
                last_package = int(packages[-1])
            else:
                indices = self._index + indices
            self._index = int(indices[-1]) + 1
            self._deliver(indices, data[self._rows].T.astype(np.float32))

    def _gone(self, why: str) -> None:
        self.connected.clear()
        self.problem = f"the board stopped answering ({why[:80]}); trying again every {RETRY_SECONDS:g} s"
        self._release()

    def _again(self) -> bool:
        if self._closing.wait(RETRY_SECONDS):
            return False
        try:
            self._shim = self._start()
        except Exception:  # noqa: BLE001 - still gone
            return False
        self._index = 0  # its counter starts again: a new epoch on the timeline
        self.problem = ""
        self.counters.reconnects += 1
        self.connected.set()
        return True
