"""Writes tests/functional/durations.json, the seconds each functional test took (setup, call and
teardown), which tests/functional/conftest.py uses to hand out the longest tests first.

    CHAINTABLE_TEST_DURATIONS=0 bash scripts/test.sh > test.log
    .venv/bin/python scripts/test_durations.py test.log

pytest leaves out the phases under 5 ms: a collected test that the log does not name counts 0 s.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "functional" / "durations.json"
PHASE = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+(tests/functional/.+?)\s*$")
sys.path.insert(0, str(REPO / "tests" / "functional"))
from node_ids import split_group  # noqa: E402


def main(log: str) -> int:
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/functional",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    seconds = {line: 0.0 for line in collected.splitlines() if line.startswith("tests/functional")}
    for line in Path(log).read_text().splitlines():
        m = PHASE.match(line)
        if m is None:
            continue
        node = split_group(m.group(2))[0]
        if node in seconds:
            seconds[node] += float(m.group(1))
    if not any(seconds.values()):
        raise SystemExit(f"{log} lists no durations: run with CHAINTABLE_TEST_DURATIONS=0")
    OUT.write_text(json.dumps({k: round(v) for k, v in sorted(seconds.items())}, indent=0) + "\n")
    print(f"{OUT.relative_to(REPO)}: {len(seconds)} tests, {sum(seconds.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
