"""Session mode: the embedded JVM's console output goes to a file, not between dbt's lines.

Spark in the dbt process prints JVM and log4j lines on every command (docs/design.md#quiet-spark).
When this process is the one that starts the JVM, it starts it with its stderr sent to a file and
a log4j2 configuration that writes Spark's log (WARN and above) to the same file. A statement that
fails has that file's lines written while it ran copied to dbt's output, so Spark's own errors
still reach the user. `CHAINTABLE_SPARK_LOG=<level>` (`WARN`, `ERROR`) turns Spark's console log
back on, set to that level (`spark.log.level`), and leaves the JVM's start as pyspark does it.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_SWITCH = "CHAINTABLE_SPARK_LOG"
_CONFIG = Path(__file__).with_name("log4j2-quiet.properties")
# Spark logs a failed task's stack trace several times over; the user needs the messages
_MAX_LINES = 30
_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")


class _State:
    lock = threading.Lock()
    log_file: Path | None = None
    failures = 0
    started_in: float | None = None  # seconds the launch took, until the first open reports it


def log_file() -> Path | None:
    """The file Spark's log goes to, when this process started the JVM quietly."""
    return _State.log_file


def offset() -> int:
    """Where the file ends now; `failure_lines(offset)` reads what was written after it."""
    path = _State.log_file
    try:
        return path.stat().st_size if path else 0
    except OSError:
        return 0


def failure_lines(start: int) -> list[str]:
    """Spark's messages written since `start`: each record's first line and its `Caused by`
    lines (stack frames left out), the last _MAX_LINES of them."""
    path = _State.log_file
    if path is None:
        return []
    _State.failures += 1
    try:
        with open(path, "rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    kept = [
        line.rstrip()
        for line in text.splitlines()
        if line.strip() and not line.startswith(("\tat ", "\t... ", "        at "))
    ]
    return kept[-_MAX_LINES:]


def _ours_to_start(params: Mapping[str, Any]) -> bool:
    """Only where this process would start a JVM itself (no Spark Connect, no gateway given)."""
    if os.environ.get("SPARK_REMOTE") or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return False
    return "spark.remote" not in params


def _switch_level() -> str | None:
    """The level `CHAINTABLE_SPARK_LOG` asks for; any value not a log4j level means Spark's own."""
    value = os.environ.get(ENV_SWITCH, "").strip().upper()
    if not value:
        return None
    return value if value in _LEVELS else ""


def start_jvm_early(params: Mapping[str, Any]) -> None:
    """Begin the JVM's start in the background when dbt creates the adapter, so that it overlaps
    dbt's parsing of the project; the first connection's `start_jvm` waits for it."""
    if not _ours_to_start(params) or os.environ.get(ENV_SWITCH):
        return

    def launch() -> None:
        try:
            start_jvm(params)
        except Exception:
            # the first connection starts it again in the foreground and reports why it fails
            return

    threading.Thread(target=launch, name="chaintable-jvm-start", daemon=True).start()


def take_start_time() -> float | None:
    """Seconds the JVM's launch took, once (None when this process did not launch it)."""
    with _State.lock:
        took, _State.started_in = _State.started_in, None
        return took


def start_jvm(params: Mapping[str, Any]) -> bool:
    """Start the JVM (once per process) as pyspark would, with its console sent to a file;
    True when this call started it.

    The profile's `server_side_parameters` go to spark-submit as pyspark passes them (driver
    memory must be known at launch); the SparkSession dbt-spark builds later finds this JVM.
    """
    from pyspark import SparkContext

    with _State.lock:
        if SparkContext._gateway is not None or not _ours_to_start(params):
            return False
        started = time.monotonic()
        _launch(params)
        _State.started_in = time.monotonic() - started
        return True


def _launch(params: Mapping[str, Any]) -> None:
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False)
    for key, value in params.items():
        conf.set(key, str(value))
    level = _switch_level()
    options = str(params.get("spark.driver.extraJavaOptions", ""))
    if level is not None or "log4j.configurationFile" in options:
        # the switch: Spark's console log as Spark prints it, at the level asked for; a user's
        # own log4j configuration is theirs to keep
        if level:
            conf.set("spark.log.level", level)
        SparkContext._ensure_initialized(gateway=launch_gateway(conf))
        return
    fd, name = tempfile.mkstemp(prefix="chaintable-spark-", suffix=".log")
    os.close(fd)
    path = Path(name)
    conf.set(
        "spark.driver.extraJavaOptions",
        f"{options} -Dlog4j.configurationFile={_CONFIG} -Dchaintable.spark.log={path}".strip(),
    )
    # progress bars would only fill the file
    conf.setIfMissing("spark.ui.showConsoleProgress", "false")
    with open(path, "ab") as sink:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": sink})
    SparkContext._ensure_initialized(gateway=gateway)
    _State.log_file = path
    atexit.register(_cleanup, path)


def _cleanup(path: Path) -> None:
    # kept after a failure: the message printed then names it for the whole stack trace
    if _State.failures == 0:
        path.unlink(missing_ok=True)
