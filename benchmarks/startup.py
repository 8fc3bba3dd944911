"""What each dbt command of a session-mode project costs before its work starts, from dbt's
debug log (`logs/dbt.log`, written by every command):

- dbt: from "Running with dbt" to "Found ..." (Python imports, adapter registration, parsing;
  a change of --vars makes dbt parse the whole project again);
- JVM launch: the adapter's `Spark JVM started in ...` line (spark-submit and the py4j
  gateway), started in the background while dbt parses; in brackets what the first connection
  still waited for it after the parse;
- session + metastore: the first statement (dbt's `show databases`, trivial itself), which
  creates the SparkSession and opens the Hive metastore (Derby in the sample);
- before work: from the start to the first statement of a model, test, seed or operation
  (dbt's catalog listing included);
- total: dbt's own `Command ... after N seconds`.

    .venv/bin/python benchmarks/startup.py [sample_project/logs/dbt.log] [--last 14]

The sample project (scripts/run_sample.sh) runs 14 dbt commands.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

STAMP = re.compile(r"^\x1b\[0m(\d\d:\d\d:\d\d\.\d+) \[\w+\s*\] \[([^\]]+)\]: (.*)$")
# dbt's own connections before the first node (the catalog listing); not a model's work
DBT_CONNECTIONS = ("master", "list_schemas", "list_")


@dataclass
class Command:
    name: str = "?"
    start: float = 0.0
    parsed: float | None = None
    jvm: float | None = None
    jvm_wait: float | None = None
    first_sql: float | None = None
    work: float | None = None
    total: float | None = None


def seconds(stamp: str) -> float:
    t = dt.datetime.strptime(stamp, "%H:%M:%S.%f")
    return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6


def parse(lines: list[str]) -> list[Command]:
    commands: list[Command] = []
    cmd: Command | None = None
    pending_first = work_first = False
    for line in lines:
        m = STAMP.match(line)
        if not m:
            continue
        t, text = seconds(m.group(1)), m.group(3)
        if text.startswith("Running with dbt="):
            cmd, work_first = Command(start=t), False
            commands.append(cmd)
            continue
        if cmd is None:
            continue
        if text.startswith("Found ") and cmd.parsed is None:
            cmd.parsed = t - cmd.start
        elif "Spark JVM started in " in text:
            cmd.jvm = float(re.search(r"started in ([\d.]+)s", text).group(1))
            waited = re.search(r"waited ([\d.]+)s", text)
            cmd.jvm_wait = float(waited.group(1)) if waited else cmd.jvm
        elif text.startswith("On ") and ": " in text and cmd.first_sql is None:
            pending_first = True
        elif pending_first and text.startswith("SQL status: OK in "):
            cmd.first_sql = float(re.search(r"in ([\d.]+) seconds", text).group(1))
            pending_first = False
            if work_first:  # an operation's first statement opened the session: work after it
                cmd.work = t - cmd.start
        if text.startswith("On ") and cmd.work is None and not work_first:
            conn = text[3:].split(":", 1)[0]
            if not conn.startswith(DBT_CONNECTIONS):
                if cmd.first_sql is None:
                    work_first = True
                else:
                    cmd.work = t - cmd.start
        done = re.match(
            r"Command `([^`]+)` (?:succeeded|failed) at .* after ([\d.]+) seconds", text
        )
        if done:
            cmd.name, cmd.total = done.group(1), float(done.group(2))
    return commands


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default = Path(__file__).resolve().parents[1] / "sample_project" / "logs" / "dbt.log"
    ap.add_argument("log", nargs="?", default=str(default))
    ap.add_argument("--last", type=int, default=14, help="the last N commands of the log")
    args = ap.parse_args()
    lines = Path(args.log).read_text(errors="replace").splitlines()
    rows = parse(lines)[-args.last :]
    print(
        "| command | dbt start + parse | JVM launch (of it after the parse) "
        "| session + metastore | before work | total |"
    )
    print("|---|---|---|---|---|---|")
    for c in rows:
        print(
            f"| `{c.name}` | {fmt(c.parsed)} | {fmt(c.jvm)} ({fmt(c.jvm_wait)}) | {fmt(c.first_sql)} "
            f"| {fmt(c.work)} "
            f"| {fmt(c.total)} |"
        )
    done = [c for c in rows if c.total is not None]
    if done:
        n = len(done)
        avg = {
            k: sum(getattr(c, k) or 0.0 for c in done) / n
            for k in ("parsed", "jvm", "jvm_wait", "first_sql", "work", "total")
        }
        print(
            f"| average of {n} | {avg['parsed']:.1f} | {avg['jvm']:.1f} ({avg['jvm_wait']:.1f}) "
            f"| {avg['first_sql']:.1f} "
            f"| {avg['work']:.1f} | {avg['total']:.1f} |"
        )


if __name__ == "__main__":
    main()
