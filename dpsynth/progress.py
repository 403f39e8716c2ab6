"""A text progress bar for long counts and releases on the command line."""

from __future__ import annotations

import sys
import time
from typing import Any


class ProgressBar:
    """A one-line text progress bar for long counts and releases (``progress(fraction, message)``).

    Draws on ``stream`` (stderr) only when it is a terminal, unless ``force``; redraws at most
    every 0.2 s. Compatible with the ``progress`` callbacks of :func:`dpsynth.release.release`
    and the engines (the dashboard passes ``st.progress(...).progress`` the same way).
    """

    def __init__(self, stream: Any = None, *, force: bool = False, width: int = 30) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self._last = 0.0
        self._start = time.monotonic()

    def __call__(self, fraction: float, message: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if fraction < 1.0 and now - self._last < 0.2:
            return
        self._last = now
        f = min(max(float(fraction), 0.0), 1.0)
        filled = int(round(f * self.width))
        line = f"\r[{'#' * filled}{'.' * (self.width - filled)}] {f * 100:3.0f}% {now - self._start:6.1f}s {message[:60]:<60}"
        self.stream.write(line)
        if f >= 1.0 and message == "Done":
            self.stream.write("\n")
        self.stream.flush()
