"""Three writers racing for one stale lock on a Hive metastore service on PostgreSQL, each a
Spark driver of its own (lock_race_driver.py), so that their renames of the lock reach the
metastore side by side: there two renames of one view can both succeed, the later renaming the
earlier one's result (publish/lock.py). Twenty trials: in each exactly one writer publishes,
the others are refused naming the holder, the day reads as the winner's rows, no scratch table
or lock is left, and at the end every day still reads (no file the chain references is gone)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from pathlib import Path

from test_lock_race import DERIVED, WRITERS

DRIVER = Path(__file__).with_name("lock_race_driver.py")
TRIALS = 20


def test_three_drivers_breaking_one_stale_lock_on_a_metastore_service(metastore, tmp_path):
    schema = "race_" + uuid.uuid4().hex[:8]
    params = dict(metastore.session_params())
    params["spark.sql.metadataCacheTTLSeconds"] = "-1"  # every look at the lock is the catalog's
    errs_of = [tmp_path / f"driver-{i}.err" for i in range(WRITERS)]
    with contextlib.ExitStack() as files:
        drivers = [
            subprocess.Popen(
                [sys.executable, str(DRIVER), json.dumps(params), schema, str(i), str(TRIALS)]
                + [str(tmp_path)],
                stdout=subprocess.DEVNULL,
                stderr=files.enter_context(open(err, "w")),
            )
            for i, err in enumerate(errs_of)
        ]
        try:
            codes = [d.wait(timeout=1200) for d in drivers]
        finally:
            for d in drivers:
                if d.poll() is None:
                    d.kill()
    errs = {i: err.read_text()[-3000:] for i, err in enumerate(errs_of)}
    assert codes == [0] * WRITERS, errs
    expected = {"20250101": [[i, f"first-20250101-{i}"] for i in range(2)]}
    for n in range(TRIALS):
        outs = {i: json.loads((tmp_path / f"out-{n}-{i}.json").read_text()) for i in range(WRITERS)}
        won = [i for i, o in outs.items() if o["ok"]]
        assert len(won) == 1, f"trial {n}: {outs}"
        for o in (o for o in outs.values() if not o["ok"]):
            assert o["type"] == "ChainLockedError", f"trial {n}: {o}"
            assert "t is locked: " in o["error"] and "did not start and wrote nothing" in o["error"]
            assert "by process" in o["error"], o  # names a holder: the winner, or the stale one
        day = f"202502{n + 1:02d}"
        expected[day] = [[i, f"w{won[0]}-{day}-{i}"] for i in range(2)]
        check = json.loads((tmp_path / f"check-{n}.json").read_text())
        assert check["rows"] == expected[day], f"trial {n}"
        assert [t for t in check["tables"] if t not in DERIVED] == [], f"trial {n}"
    assert json.loads((tmp_path / "final.json").read_text()) == expected
