"""Train / validation / test splits that keep each recording group on one side."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tinynas.data.windows import DataError, Windows


@dataclass(frozen=True)
class Split:
    """Indices into a `Windows` for each side, and the protocol that produced them."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    protocol: str
    # The session(s) validation comes from, never trained on (leave-one-session-out), else None:
    # then validation shares sessions with training and ranks what fits the same block.
    held_out: str | None = None
    # Why validation is, or is not, on a held-out session (e.g. "one session only (0hp)").
    held_out_reason: str = ""

    def describe(self) -> dict:
        """JSON-ready summary (sizes, protocol, held-out session and why) for cards and reports."""
        return {"protocol": self.protocol, "train": int(len(self.train)), "val": int(len(self.val)),
                "test": int(len(self.test)), "held_out": self.held_out, "held_out_reason": self.held_out_reason}


def _groups_for(cumulative: np.ndarray, wanted: float) -> int:
    """How many leading groups bring the window count closest to `wanted` (at least one)."""
    return int(np.argmin(np.abs(cumulative - wanted))) + 1


def group_split(windows: Windows, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
                seed: int = 0) -> Split:
    """Split by recording group, stratified by class: every group lands wholly on one side.

    Groups are assigned to the class most of their windows carry; for each class its groups
    are shuffled and dealt so that validation and test each get at least one group and about
    `fractions` of the windows.
    """
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-6:
        raise DataError(f"split fractions must be three positive numbers summing to 1, got {fractions}")
    rng = np.random.default_rng(seed)
    names, inverse = np.unique(windows.groups, return_inverse=True)
    majority = np.array([np.bincount(windows.y[inverse == g]).argmax() for g in range(len(names))])
    sides: list[list[int]] = [[], [], []]
    for label in range(windows.classes):
        members = np.flatnonzero(majority == label)
        if len(members) == 0:
            continue
        if len(members) < 3:
            raise DataError(f"class {windows.class_names[label]!r} has {len(members)} recording group(s); "
                            f"a train/val/test split by recording needs at least 3")
        members = rng.permutation(members)
        sizes = np.array([np.sum(inverse == g) for g in members])
        total = sizes.sum()
        cumulative = np.cumsum(sizes)
        n_val = min(_groups_for(cumulative, fractions[1] * total), len(members) - 2)
        rest = cumulative[n_val:] - cumulative[n_val - 1]
        n_test = min(_groups_for(rest, fractions[2] * total), len(members) - n_val - 1)
        sides[1] += members[:n_val].tolist()
        sides[2] += members[n_val:n_val + n_test].tolist()
        sides[0] += members[n_val + n_test:].tolist()
    parts = [np.flatnonzero(np.isin(inverse, side)) for side in sides]
    for name, part in zip(("train", "validation", "test"), parts):
        if len(part) == 0:
            raise DataError(f"the {name} split is empty")
    return Split(parts[0], parts[1], parts[2],
                 f"by recording group, stratified by class, {fractions[0]:.0%}/{fractions[1]:.0%}/"
                 f"{fractions[2]:.0%} of windows, seed {seed}")


def temporal_split(windows: Windows, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2)) -> Split:
    """Earlier windows train, later ones validate, the latest test, per class and session.

    Within each (class, session) sequence, windows are ordered by `time_index` and cut at the
    fraction boundaries. A window that overlaps (same recording, less than one window length
    apart) a window on an earlier side is dropped, so no window crosses a boundary.
    """
    if windows.time_index is None:
        raise DataError("a temporal split needs each window's time (time_index); this data has none")
    side = np.full(len(windows), -1)
    _assign_temporal(windows, np.arange(len(windows)), fractions, side)
    dropped = _drop_overlaps(windows, side)
    protocol = (f"temporal per class and session: earliest {fractions[0]:.0%} train, next {fractions[1]:.0%} "
                f"validation, latest {fractions[2]:.0%} test" + (f"; {dropped} boundary-overlapping windows dropped"
                                                                  if dropped else ""))
    return Split(np.flatnonzero(side == 0), np.flatnonzero(side == 1), np.flatnonzero(side == 2), protocol)


def _times(windows: Windows) -> np.ndarray:
    """Each window's time, or its position when the data has no times (order of loading)."""
    return windows.time_index if windows.time_index is not None else np.arange(len(windows))


def _assign_temporal(windows: Windows, indices: np.ndarray, fractions: tuple[float, float, float],
                     side: np.ndarray) -> None:
    """Set side[i] (0 train, 1 val, 2 test) for `indices`, cut in time per (class, session)."""
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-6:
        raise DataError(f"split fractions must be three positive numbers summing to 1, got {fractions}")
    sessions = windows.sessions if windows.sessions is not None else windows.groups
    times = _times(windows)
    chosen = np.zeros(len(windows), dtype=bool)
    chosen[indices] = True
    for label in range(windows.classes):
        for session in np.unique(sessions[chosen & (windows.y == label)]):
            members = np.flatnonzero(chosen & (windows.y == label) & (sessions == session))
            members = members[np.argsort(times[members], kind="stable")]
            if len(members) < 3:
                raise DataError(f"class {windows.class_names[label]!r} has {len(members)} window(s) in session "
                                f"{str(session)!r}; a temporal split needs at least 3")
            cut_val = min(max(1, round(fractions[0] * len(members))), len(members) - 2)
            cut_test = min(max(cut_val + 1, round((fractions[0] + fractions[1]) * len(members))), len(members) - 1)
            side[members[:cut_val]] = 0
            side[members[cut_val:cut_test]] = 1
            side[members[cut_test:]] = 2


def _drop_overlaps(windows: Windows, side: np.ndarray) -> int:
    """Drop (side -1) each window overlapping one of its recording on an earlier side; how many."""
    if windows.time_index is None:
        return 0
    length = windows.window_length
    for later in (1, 2):
        for index in np.flatnonzero(side == later):
            earlier = np.flatnonzero((side >= 0) & (side < later) & (windows.groups == windows.groups[index]))
            close = np.abs(windows.time_index[earlier] - windows.time_index[index]) < length
            if close.any():
                side[index] = -1
    return int(np.sum(side == -1))


def _halve(windows: Windows, members: np.ndarray, side: np.ndarray) -> None:
    """Split one class's windows of a held-out session between validation (1) and test (2).

    Whole recording groups, earliest first, go to validation until about half the windows; with
    a single recording (a CWRU file) its earlier half validates and its later half tests, and the
    test windows overlapping a validation window are dropped later by `_drop_overlaps`.
    """
    times = _times(windows)
    groups = windows.groups[members]
    names = np.unique(groups)
    if len(names) >= 2:
        first = np.array([times[members[groups == name]].min() for name in names])
        names = names[np.argsort(first, kind="stable")]
        sizes = np.cumsum([np.sum(groups == name) for name in names])
        count = min(len(names) - 1, int(np.argmin(np.abs(sizes - len(members) / 2))) + 1)
        in_val = np.isin(groups, names[:count])
        side[members[in_val]] = 1
        side[members[~in_val]] = 2
        return
    members = members[np.argsort(times[members], kind="stable")]
    cut = max(1, (len(members) + 1) // 2)
    side[members[:cut]] = 1
    side[members[cut:]] = 2


def _leave_session_out(windows: Windows) -> Split | str:
    """The leave-one-session-out split, or the reason it is impossible (one short sentence)."""
    if windows.sessions is None:
        return "no session labels"
    order = sorted(np.unique(windows.sessions).tolist())
    if len(order) < 2:
        return f"one session only ({order[0]})"
    side = np.full(len(windows), -1)
    single: list[int] = []
    used: tuple[set, set, set] = (set(), set(), set())
    for label in range(windows.classes):
        in_class = windows.y == label
        mine = [name for name in order if np.any(in_class & (windows.sessions == name))]
        if len(mine) < 2:
            single.append(label)
            continue
        trained, validated, tested = (mine[:1], mine[1], mine[1]) if len(mine) == 2 else (mine[:-2], mine[-2], mine[-1])
        side[in_class & np.isin(windows.sessions, trained)] = 0
        if validated == tested:
            _halve(windows, np.flatnonzero(in_class & (windows.sessions == validated)), side)
        else:
            side[in_class & (windows.sessions == validated)] = 1
            side[in_class & (windows.sessions == tested)] = 2
        for sessions, names in zip(used, (trained, [validated], [tested])):
            sessions.update(names)
    if not used[0]:
        return "no class spans two sessions"
    if single:
        try:
            _assign_temporal(windows, np.flatnonzero(np.isin(windows.y, single)), (0.7, 0.1, 0.2), side)
        except DataError as exc:  # e.g. 2 windows of a one-session class: the fallback protocol says more
            return str(exc)
    dropped = _drop_overlaps(windows, side)
    train, val, test = (np.flatnonzero(side == k) for k in range(3))
    held_out = ", ".join(sorted(used[1]))
    if len(val) == 0 or len(test) == 0:
        return f"held-out session {held_out} has too few windows per class to both validate and test"
    trains, tests = ", ".join(sorted(used[0])), ", ".join(sorted(used[2]))
    text = (f"trains on {trains}, validates and tests on held-out session {held_out} (split between them by "
            f"recording, or in time within one recording)" if used[1] == used[2] else
            f"trains on {trains}, validates on held-out session {held_out}, tests on held-out session {tests}")
    if single:
        text += (f"; {len(single)} class(es) recorded in one session only, split in time within it (70/10/20): "
                 + ", ".join(windows.class_names[label] for label in single))
    if dropped:
        text += f"; {dropped} overlapping windows dropped"
    reason = f"validates on held-out session {held_out}" + (
        f" (except {len(single)} class(es) recorded in one session only)" if single else "")
    return Split(train, val, test, "leave-one-session-out: " + text, held_out, reason)


def leave_session_out_split(windows: Windows) -> Split:
    """Validate (and test) on sessions the training never saw: selection ranks what transfers.

    Sessions (recording days, CWRU loads "0hp".."3hp", session folders) are ordered by name, so
    dates and loads sort in time and load order. For each class, by the sessions it was recorded in:
    - 3 or more: train on all but its two latest, validate on the second latest, test on the latest;
    - 2: train on the earlier; the later is split between validation and test: whole recordings,
      earliest first, about half the windows each; a single recording (a CWRU file) in time,
      first half validates, second half tests, test windows overlapping validation dropped;
    - 1 (e.g. CWRU "normal", absent at 1 hp): cut in time within that session, 70/10/20, as the
      segment protocol does, so the class still trains, validates and tests.
    Held out per class, so that letters recorded on different June days are both held out on the
    re-worn session. The protocol text lists each side's sessions: a session trains one class and is
    held out for another only when classes were recorded in different numbers of sessions.
    Impossible (a DataError saying why) with no sessions, one session, no class spanning two
    sessions, or a held-out session too small to give both validation and test windows.
    """
    split = _leave_session_out(windows)
    if isinstance(split, str):
        raise DataError(f"leave-one-session-out is impossible: {split}")
    return split


PROTOCOLS = ("auto", "paper", "segment", "session", "group")


def make_split(windows: Windows, protocol: str = "auto", seed: int = 0) -> Split:
    """A named protocol for this data set; the protocol text says exactly what was done.

    - paper: the method's. CWRU: the first 80 % of each file's windows train (the last tenth of
      them validates, as Keras's validation_split does), the last 20 % test (160/40 with 200
      windows per file); contiguous blocks, not shuffled windows. ISL: stratified random 70/10/20
      by recording (each ISL recording is one window).
    - segment: temporal 70/10/20 within each recording (CWRU).
    - session: leave-one-session-out (`leave_session_out_split`) where a class spans two sessions;
      otherwise (ISL June: each letter was recorded in one block on one day) temporal within each block.
    - group: by recording group, stratified by class, 70/10/20 (synthetic data, recorded sessions).
    - auto: leave-one-session-out whenever it is possible (any source); otherwise segment for
      CWRU, session (temporal) for ISL, group for the rest, and the protocol says why.
    `Split.held_out` names the session validation is held out on (None otherwise, with the reason).
    """
    source = windows.provenance.get("source", "")
    if protocol not in PROTOCOLS:
        raise DataError(f"unknown split protocol {protocol!r}; choose one of: {', '.join(PROTOCOLS)}")
    if protocol in ("auto", "session"):
        loso = _leave_session_out(windows)
        if isinstance(loso, Split):
            return loso if protocol == "auto" else replace(loso, protocol="session: " + loso.protocol)
        reason = loso
        if protocol == "session":
            return replace(_within_sessions(windows, reason), held_out_reason=reason)
        protocol = {"cwru": "segment", "isl": "session"}.get(source, "group")
        if protocol == "session":  # its text already says why
            return replace(_within_sessions(windows, reason), held_out_reason=reason)
        split = _named(windows, protocol, seed)
        return replace(split, protocol=f"{split.protocol}; not leave-one-session-out: {reason}",
                       held_out_reason=reason)
    split = _named(windows, protocol, seed)
    return replace(split, held_out_reason=f"--split {protocol}: validation shares the training sessions")


def _named(windows: Windows, protocol: str, seed: int) -> Split:
    """The group, segment and paper protocols."""
    source = windows.provenance.get("source", "")
    if protocol == "group":
        return group_split(windows, seed=seed)
    if protocol == "segment":
        split = temporal_split(windows, (0.7, 0.1, 0.2))
        return Split(split.train, split.val, split.test, "segment: " + split.protocol)
    if source == "isl" or windows.time_index is None:
        split = group_split(windows, (0.7, 0.1, 0.2), seed=seed)
    else:
        split = temporal_split(windows, (0.72, 0.08, 0.2))
    return Split(split.train, split.val, split.test, "paper: " + split.protocol)


def _within_sessions(windows: Windows, reason: str) -> Split:
    """The session protocol when no session can be held out: temporal within each class's session."""
    if windows.sessions is None:
        raise DataError("a session split needs session labels; this data has none")
    split = temporal_split(windows, (0.7, 0.1, 0.2))
    return Split(split.train, split.val, split.test,
                 f"session ({reason}, so temporal within each class's session): " + split.protocol)
