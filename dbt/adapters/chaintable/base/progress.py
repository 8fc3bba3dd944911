"""Elapsed time for the progress lines that long operations log through dbt's logger (a
bootstrap, a compaction over many groups, an expiration, a rebuild of many cumulative days):
what, how many partitions, how long so far."""

from __future__ import annotations

import time


class Stopwatch:
    def __init__(self) -> None:
        self._start = time.monotonic()

    def seconds(self) -> float:
        return time.monotonic() - self._start

    def __str__(self) -> str:
        return f"{self.seconds():.1f}s"
