"""Named steps at which a test stops an operation (docs/design.md#crash-safety-and-locking): the crash tests
kill, fail or slow a writer there and check what a later run recovers."""

from __future__ import annotations

import os

from dbt_common.exceptions import DbtRuntimeError


class SimulatedCrash(Exception):
    """Raised by a failpoint: the lock's cleanup lets it through untouched, so the tables stay
    exactly as a killed process would leave them (in-process tests)."""


def failpoint(name: str) -> None:
    """`CHAINTABLE_FAILPOINT=<name>[:kill|:error|:sleep=<s>]` stops the process at a named step
    of an operation: `kill` sends SIGKILL to the process (a real crash, for subprocess tests),
    `error` raises the error a failed statement raises (the caller's error handling runs),
    `sleep=<s>` holds the step for s seconds and goes on (a slow writer, for lock tests),
    `wait=<path>` holds it until the test creates that file (at most ten minutes), so a lock test
    holds a writer exactly as long as it needs; otherwise it raises SimulatedCrash (for in-process tests). Unset in production: one dict
    lookup."""
    wanted = wanted_failpoint()
    if not wanted:
        return
    point, _, how = wanted.partition(":")
    if point != name:
        return
    if how == "kill":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    if how.startswith("sleep="):
        import time

        time.sleep(float(how.split("=", 1)[1]))
        return
    if how.startswith("wait="):
        _wait_for(how.split("=", 1)[1])
        return
    if how == "error":
        raise DbtRuntimeError(f"failpoint {name}: a statement failed")
    raise SimulatedCrash(f"failpoint {name}")


def wanted_failpoint() -> str | None:
    """The failpoint asked for: CHAINTABLE_FAILPOINT. A test whose writers run in threads of one
    process replaces this function to ask for a step in one thread only."""
    return os.environ.get("CHAINTABLE_FAILPOINT")


def _wait_for(path: str, timeout: float = 600.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.2)
