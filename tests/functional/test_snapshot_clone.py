"""dbt snapshot and dbt clone on parquet, real dbt on real Spark: three days of snapshots give
dbt's SCD2 rows for the timestamp and check strategies and every hard_deletes mode, a run that
fails after writing its new rows aside leaves every snapshot as it was (and the next run cleans
up), and `dbt clone --state` then `dbt build -s state:modified+` works over a chain model and a
table model (README: dbt commands)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import uuid
from pathlib import Path

from helpers import schema_project

D = dt.datetime
SOURCE = "id int, name string, updated_at timestamp"
DAYS = [
    [(1, "a", D(2025, 8, 1)), (2, "b", D(2025, 8, 1)), (3, "c", D(2025, 8, 1))],
    [(1, "a2", D(2025, 8, 2)), (2, "b", D(2025, 8, 1)), (3, "c", D(2025, 8, 1))]
    + [(4, "d", D(2025, 8, 2))],
    [(1, "a2", D(2025, 8, 2)), (3, "c3", D(2025, 8, 3)), (4, "d", D(2025, 8, 2))],
    [(1, "a2", D(2025, 8, 2)), (3, "c3", D(2025, 8, 3)), (4, "d4", D(2025, 8, 4))],
]
SNAPSHOTS = """
{% snapshot ts_ignore %}
{{ config(target_schema=target.schema, strategy='timestamp', unique_key='id',
          updated_at='updated_at') }}
select * from {{ target.schema }}.src
{% endsnapshot %}

{% snapshot ts_new_record %}
{{ config(target_schema=target.schema, strategy='timestamp', unique_key='id',
          updated_at='updated_at', hard_deletes='new_record',
          dbt_valid_to_current="to_timestamp('9999-12-31')",
          snapshot_meta_column_names={'dbt_valid_from': 'valid_from', 'dbt_valid_to': 'valid_to',
            'dbt_scd_id': 'scd_id', 'dbt_updated_at': 'changed_at', 'dbt_is_deleted': 'deleted'}) }}
select * from {{ target.schema }}.src
{% endsnapshot %}

{% snapshot check_invalidate %}
{{ config(target_schema=target.schema, strategy='check', unique_key='id', check_cols=['name'],
          hard_deletes='invalidate', file_format='orc') }}
select id, name from {{ target.schema }}.src
{% endsnapshot %}
"""
FOREVER = D(9999, 12, 31)


def snapshot_day(p, day: int, expect_ok: bool = True) -> tuple[D, D]:
    """Day `day` of the source, then `dbt snapshot`; the times around it."""
    p.table("src", SOURCE, DAYS[day])
    before = D.now()
    p.dbt("snapshot", expect_ok=expect_ok)
    return before, D.now()


def by_run(value, runs: list[tuple[D, D]]):
    """A time a snapshot run took (snapshot_get_time) as R1, R2, ...; other values as they are."""
    for i, (start, end) in enumerate(runs):
        if isinstance(value, D) and start <= value <= end:
            return f"R{i + 1}"
    return value


def snapshot_rows(p, runs) -> dict[str, list[tuple]]:
    queries = {
        "ts_ignore": "select id, name, dbt_valid_from, dbt_valid_to from {s}.ts_ignore",
        "ts_new_record": "select id, name, valid_from, valid_to, deleted from {s}.ts_new_record",
        "check_invalidate": "select id, name, dbt_valid_from, dbt_valid_to from {s}.check_invalidate",
    }
    return {
        name: sorted(
            (
                tuple(by_run(v, runs) for v in row)
                for row in p.spark.sql(sql.format(s=p.schema)).collect()
            ),
            key=lambda r: tuple(str(v) for v in r),
        )
        for name, sql in queries.items()
    }


def day(n: int) -> D:
    return D(2025, 8, n)


AFTER_THREE_DAYS = {
    "ts_ignore": [
        (1, "a", day(1), day(2)),
        (1, "a2", day(2), None),
        (2, "b", day(1), None),  # ignore: a deleted key stays current
        (3, "c", day(1), day(3)),
        (3, "c3", day(3), None),
        (4, "d", day(2), None),
    ],
    "ts_new_record": [
        (1, "a", day(1), day(2), "False"),
        (1, "a2", day(2), FOREVER, "False"),
        (2, "b", day(1), "R3", "False"),  # closed when the key went, and a deletion record
        (2, "b", "R3", FOREVER, "True"),
        (3, "c", day(1), day(3), "False"),
        (3, "c3", day(3), FOREVER, "False"),
        (4, "d", day(2), FOREVER, "False"),
    ],
    "check_invalidate": [
        (1, "a", "R1", "R2"),
        (1, "a2", "R2", None),
        (2, "b", "R1", "R3"),  # invalidate: closed at the run that found the key gone
        (3, "c", "R1", "R3"),
        (3, "c3", "R3", None),
        (4, "d", "R2", None),
    ],
}


def table_dirs(p) -> list[str]:
    """The directories in the schema's folder of the warehouse (the snapshots' and scratch ones)."""
    location = p.spark.sql(f"describe database extended {p.schema}").collect()
    root = next(r[1] for r in location if r[0] == "Location").removeprefix("file:")
    return sorted(d.name for d in Path(root).iterdir() if d.name != "src")


def locations(p, tables) -> list[str]:
    found = []
    for t in tables:
        rows = p.spark.sql(f"describe table extended {p.schema}.{t}").collect()
        found.append(next(r[1] for r in rows if r[0] == "Location").rsplit("/", 1)[1])
    return sorted(found)


def test_snapshot_three_days_then_a_failed_run_changes_nothing(
    spark, spark_root, tmp_path, monkeypatch
):
    with schema_project(spark, spark_root, tmp_path / "proj") as p:
        p.file("snapshots/snaps.sql", SNAPSHOTS)
        runs = [snapshot_day(p, i) for i in range(3)]
        after = snapshot_rows(p, runs)
        for name, rows in AFTER_THREE_DAYS.items():
            assert after[name] == rows, (name, after[name])
        names = list(AFTER_THREE_DAYS)
        # each snapshot's files: its directory alone (the old ones went with each switch)
        assert table_dirs(p) == locations(p, names)

        monkeypatch.setenv("CHAINTABLE_FAILPOINT", "snapshot.written:error")
        snapshot_day(p, 3, expect_ok=False)
        assert "failpoint snapshot.written: a statement failed" in p.log_text()
        assert snapshot_rows(p, runs) == AFTER_THREE_DAYS
        scratch = [r[1] for r in spark.sql(f"show tables in {p.schema}").collect()]
        assert sorted(t for t in scratch if "__dbt_snapshot_" in t) != []

        monkeypatch.delenv("CHAINTABLE_FAILPOINT")
        runs.append(snapshot_day(p, 3))
        after = snapshot_rows(p, runs)
        assert after["ts_ignore"] == sorted(
            AFTER_THREE_DAYS["ts_ignore"][:5] + [(4, "d", day(2), day(4)), (4, "d4", day(4), None)],
            key=lambda r: tuple(str(v) for v in r),
        )
        assert after["check_invalidate"][:5] == AFTER_THREE_DAYS["check_invalidate"][:5]
        assert after["check_invalidate"][5:] == [(4, "d", "R2", "R4"), (4, "d4", "R4", None)]
        tables = sorted(r[1] for r in spark.sql(f"show tables in {p.schema}").collect())
        assert tables == sorted(["src", *names])  # the failed run's scratch tables dropped
        assert table_dirs(p) == locations(p, names)


# the source stays in production's schema, whichever target reads it
SOURCES = """
version: 2
sources:
  - name: raw
    schema: "{schema}"
    tables: [{name: src}]
unit_tests:
  - name: c_marks_an_incremental_run
    model: c
    overrides: {macros: {is_incremental: true}}
    given:
      - input: source('raw', 'src')
        rows: [{id: 7, name: x}]
    expect:
      rows: [{id: 7, name: x/inc, dt: '20250801'}]
"""
# is_incremental() marks the rows: the unit test above checks it through dbt's override
CHAIN = """
{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt']) }}
select id, concat(name, '{{ "/inc" if is_incremental() else "" }}') as name,
       '{{ var("dt") }}' as dt
from {{ source('raw', 'src') }}
"""
TABLE = """
{{ config(materialized='table') }}
select id, concat(name, '!') as shout, dt from {{ ref('c') }}
"""


def test_clone_then_build_state_modified(spark, spark_root, tmp_path):
    """Production builds a chain `c` (its unit test first) and a table `m` over it; dev clones
    both from its state (views over production's relations), then builds what changed: `c`
    gets its first load in dev, `m` is rebuilt over it, and production is untouched.
    `dbt show --inline` over ref() shows the chain's state."""
    dev = "t_" + uuid.uuid4().hex[:10]
    with schema_project(spark, spark_root, tmp_path / "proj") as p:
        try:
            p.artifacts = True
            profiles = json.loads((p.root / "profiles.yml").read_text())
            profiles["chain_test"]["outputs"]["dev"] = {**p.output, "schema": dev}
            (p.root / "profiles.yml").write_text(json.dumps(profiles))
            p.table("src", "id int, name string", [(1, "a"), (2, "b")])
            p.file("models/sources.yml", SOURCES.replace("{schema}", p.schema))
            p.model("c", CHAIN)
            p.model("m", TABLE)
            vars = {"dt": "20250801"}
            res = p.dbt("build", vars=vars)
            assert sorted(r.node.name for r in res.result) == [
                "c",
                "c_marks_an_incremental_run",
                "m",
            ]
            state = tmp_path / "state"
            shutil.copytree(p.root / "target", state)
            p.dbt("show", "--inline", "select name from {{ ref('c') }} where id = 2", vars=vars)
            assert "| b    |" in p.log_text()

            p.dbt("clone", "--state", str(state), "--target", "dev", vars=vars)
            views = {r[1] for r in spark.sql(f"show views in {dev}").collect()}
            assert views == {"c", "m"}
            assert p.rows(f"select * from {dev}.m") == [
                (1, "a!", "20250801"),
                (2, "b!", "20250801"),
            ]

            p.model("c", CHAIN.replace("select id,", "select id, upper(name) as loud,"))
            res = p.dbt(
                "build",
                "-s",
                "state:modified+",
                "--state",
                str(state),
                "--target",
                "dev",
                vars=vars,
            )
            built = {r.node.name: str(r.status) for r in res.result}
            assert built == {"c": "success", "c_marks_an_incremental_run": "pass", "m": "success"}
            assert p.rows(f"select id, loud, name from {dev}.c") == [(1, "A", "a"), (2, "B", "b")]
            assert p.rows(f"show partitions {dev}.c__snapshot") == [("dt=20250801",)]
            assert {r[1] for r in spark.sql(f"show views in {dev}").collect()} == {"c"}
            assert p.rows(f"select * from {dev}.m") == [
                (1, "a!", "20250801"),
                (2, "b!", "20250801"),
            ]
            # production as it was
            assert p.rows("select * from {s}.c") == [(1, "a", "20250801"), (2, "b", "20250801")]
        finally:
            spark.sql(f"drop database if exists {dev} cascade")
