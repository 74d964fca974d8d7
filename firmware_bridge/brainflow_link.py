"""A biosignal board through BrainFlow: OpenBCI boards, OYMotion's gForce armbands, Muse and many more.

`brainflow:BOARD?option=value&...` where BOARD is a BrainFlow board name as `brainflow.BoardIds` spells it, in any
case, with or without its `_board` ending (`synthetic`, `synthetic_board`, `SYNTHETIC_BOARD`, `cyton`,
`playback_file`, `gforce_pro`, ...) or its number, and the options are `BrainFlowInputParams` fields
(`serial_port`, `mac_address`, `ip_address`, `ip_port`, `file`, `master_board`, `serial_number`, `other_info`,
`timeout`) plus `channels=emg` (default) or `channels=accel`. An unknown board, an option out of its range
(url_options.py) and a `master_board` that is no board are refused in one line when the link is made; a
`serial_port` or `file` that is not there (or is not a serial port, a regular file) in one line naming it when it is
opened, never BrainFlow's bare error code. The board's own description gives the channels and the rate; its package
counter shows lost packets, which leave a gap on the timeline as lost frames do; a sample with a value that is no
float32 number (NaN, infinity) is refused (`bad_values`). A board that stops answering is prepared again every
second; what it sends then starts a new epoch. Needs `pip install brainflow` (tinynas[sensors]).
"""

from __future__ import annotations

import os
import platform
import stat
import time
import urllib.parse
from typing import Any

import numpy as np

from firmware_bridge.link import Link, LinkError, PolledLink
from firmware_bridge.protocol import Hello
from firmware_bridge.url_options import MAX_CHANNELS, MAX_RATE_HZ, URL_RANGES, option

SCHEME = "brainflow:"
POLL_SECONDS = 0.02
RETRY_SECONDS = 1.0
SILENT_SECONDS = 2.0
"""A board that sends nothing for this long has gone (BrainFlow's serial drivers retry a vanished port forever
without a word: a Cyton's dongle pulled, a board reset); it is prepared again every RETRY_SECONDS."""
_PARAMS = ("serial_port", "mac_address", "ip_address", "ip_port", "file", "master_board", "serial_number",
           "other_info", "timeout", "ip_protocol")
KNOWN_BOARDS = "synthetic, cyton, cyton_daisy, ganglion, gforce_pro, muse_2, playback_file"
"""A few of BrainFlow's board names, for the line that refuses an unknown one."""
_MAX_TEXT = 4096
"""The longest text option (a port, an address, a file name) handed to BrainFlow's C++."""


def board_id(name: str, url: str, what: str = "board") -> int:
    """BrainFlow's number of the board `name`: a BoardIds name in any case, with or without its `_board` ending
    (`synthetic`, `synthetic_board`, `SYNTHETIC_BOARD`), or its number; LinkError in one line for any other."""
    from brainflow.board_shim import BoardIds

    boards = {board.name.lower(): board.value for board in BoardIds if board is not BoardIds.NO_BOARD}
    key = name.strip().lower()
    if key.lstrip("-").isdigit() and len(key) <= 6 and int(key) in boards.values():
        return int(key)
    found = boards.get(key, boards.get(key + "_board"))
    if found is None:
        raise LinkError(f"{url}: BrainFlow knows no {what} {name[:60]!r} (its names, any case, with or without "
                        f"_board: {KNOWN_BOARDS}, ... {len(boards)} in all, as brainflow.BoardIds lists them)")
    return found


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
        board = board_id(name, url)
        params = BrainFlowInputParams()
        for key, value in query.items():
            if key == "master_board":
                params.master_board = board_id(value, url, "master_board")
            elif key in URL_RANGES["brainflow"]:
                setattr(params, key, int(option(url, "brainflow", key, value)))
            elif len(value) > _MAX_TEXT or "\0" in value:
                raise LinkError(f"{url}: {key} must be at most {_MAX_TEXT} characters, without NUL")
            else:
                setattr(params, key, value)
        plays_back = board in (BoardIds.PLAYBACK_FILE_BOARD.value, BoardIds.STREAMING_BOARD.value)
        if plays_back and "master_board" not in query:
            raise LinkError(f"{url}: a {name} board plays what another board recorded: say which, e.g. "
                            f"&master_board=synthetic (or cyton, ...)")
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
        rate = float(BoardShim.get_sampling_rate(described))
        if not (0 < rate <= MAX_RATE_HZ) or len(rows) > MAX_CHANNELS:  # NaN fails too
            raise LinkError(f"{self.url}: BrainFlow describes the board with {len(rows)} {self.kind} channels at "
                            f"{rate:g} Hz: no stream tinynas can record (1 to {MAX_CHANNELS} channels, a rate above "
                            f"0 and at most {MAX_RATE_HZ:g} Hz)")
        return described, list(rows), rate, package

    def _check_files(self) -> None:
        """The serial port and the file the board is to open, in one line when they are not there or not what they
        should be (BrainFlow says UNABLE_TO_OPEN_PORT_ERROR:2 or INVALID_ARGUMENTS_ERROR:13, nothing more, and a
        named pipe given as a file would block its reader for ever)."""
        port, file = self.params.serial_port, self.params.file
        if port and (port.startswith("/") or port.startswith(".")):  # a path; COM3 and the like are left to BrainFlow
            try:
                mode = os.stat(port).st_mode
            except FileNotFoundError:
                raise LinkError(f"cannot open {self.url}: there is no serial port {port} (is the board's dongle or "
                                f"cable plugged in? on Linux it is /dev/ttyUSB0 or /dev/ttyACM0, or a name under "
                                f"/dev/serial/by-id/)") from None
            except OSError as exc:
                raise LinkError(f"cannot open {self.url}: serial port {port}: {exc.strerror}") from None
            if not stat.S_ISCHR(mode):
                raise LinkError(f"cannot open {self.url}: {port} is not a serial port (not a character device)")
        if file:
            from firmware_bridge.safe_read import check_regular

            try:
                check_regular(file, "recording")
            except OSError as exc:
                raise LinkError(f"cannot open {self.url}: file {file}: {exc.strerror or exc}") from None

    def _said(self, exc: Exception) -> str:
        """BrainFlow's error in words where its code says something the user can act on."""
        code = getattr(exc, "exit_code", None)
        port = self.params.serial_port
        if code == 2 and port:  # UNABLE_TO_OPEN_PORT_ERROR
            return f"BrainFlow cannot open serial port {port} (in use by another program, or no permission?)"
        if code == 13 and not any(getattr(self.params, key) for key in ("serial_port", "mac_address", "ip_address",
                                                                            "file", "serial_number")):
            return ("BrainFlow refused the board's settings (INVALID_ARGUMENTS_ERROR): say how to reach it, e.g. "
                    "?serial_port=/dev/ttyUSB0 (or mac_address=, ip_address=, serial_number=)")
        return str(exc)[:200]

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
            self._check_files()
            self._shim = self._start()
        except LinkError:
            raise
        except Exception as exc:  # noqa: BLE001 - BrainFlowError and the library's ValueErrors: one line
            raise LinkError(f"cannot open {self.url}: {self._said(exc)}") from None
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
                raw = data[self._package]
                counted = np.isfinite(raw) & (np.abs(raw) < 2 ** 31)  # a counter no board sends: the next index
                packages = np.where(counted, raw, 0).astype(np.int64)
                steps = np.diff(np.concatenate([[packages[0] - 1 if last_package is None else last_package],
                                                packages])) % 256
                steps[steps == 0] = 1
                steps[~counted | ~np.concatenate([[True], counted[:-1]])] = 1  # and the one after it
                indices = self._index - 1 + np.cumsum(steps)
                last_package = int(packages[-1]) if counted[-1] else None
            else:
                indices = self._index + indices
            self._index = int(indices[-1]) + 1
            self._deliver(indices, data[self._rows].T)  # float64: a NaN or a value beyond float32 is refused

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
