"""The one error base of firmware_bridge: link, protocol, plan and session-format errors derive from it."""


class BridgeError(Exception):
    """Base of every error firmware_bridge reports (a closed port, a bad frame, an unusable plan)."""


class CollectionPaused(BridgeError):
    """A guided collection stopped itself for the user to act (e.g. a class rejected too often).

    The accepted windows are on disk; the collection continues from them when it is run again.
    `label` and `problems` say where it stopped and what the last rejected attempt showed.
    """

    def __init__(self, message: str, label: str = "", problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.label = label
        self.problems = list(problems or [])
