"""A progress bar for long transfers, shown on a terminal once a transfer has taken a
second. It uses ``tqdm`` when that optional dependency is installed (Debian:
python3-tqdm) and standard error is a terminal; otherwise it shows nothing.
``GPUCMD_PROGRESS=0`` turns it off."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Optional

#: Seconds a transfer runs before its bar appears.
SHOW_AFTER_SECONDS = 1.0


def _enabled() -> bool:
    return os.environ.get("GPUCMD_PROGRESS", "1") != "0" and sys.stderr.isatty()


class Bar:
    """Counts the bytes of one transfer of ``total`` bytes; draws them once it has run
    for :data:`SHOW_AFTER_SECONDS`."""

    def __init__(self, total: int, what: str) -> None:
        self._total = total
        self._what = what
        self._done = 0
        self._started = time.monotonic()
        self._bar: Optional[Any] = None
        self._enabled = _enabled()

    def advance(self, nbytes: int) -> None:
        self._done += nbytes
        if not self._enabled:
            return
        if self._bar is None and time.monotonic() - self._started >= SHOW_AFTER_SECONDS:
            try:
                import tqdm  # optional
            except ImportError:
                self._enabled = False
                return
            self._bar = tqdm.tqdm(total=self._total, initial=self._done - nbytes, unit="B",
                                  unit_scale=True, desc=f"gpucmd {self._what}", leave=False)
        if self._bar is not None:
            self._bar.update(nbytes)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
