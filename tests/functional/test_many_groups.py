"""A chain of 1,000 groups through real dbt: its view's text and its state in table properties
grow with the groups, and the metastore caps both (docs/design.md#stored-state: 32,672
characters a property value; Derby keeps 32,700 characters of a view's text). The chain lives
in a schema named `..._hourly` (ho-url-y), as in test_redaction.py, so every location Spark
lists back is redacted and the adapter reads its hex mirrors. Each step reads every day of
every group through the view against the state computed here."""

from __future__ import annotations

import pytest

# ~16 minutes on a 2-core machine (a day of 1,000 groups publishes 1,000 partitions, a rerun
# switches 1,000 locations one by one): not in the suite's default run, which has 20 minutes
# for everything; `bash scripts/test.sh -m scale tests/functional` runs it (README)
pytestmark = pytest.mark.scale

GROUPS = [f"r{i:03d}" for i in range(1000)]
DAYS = ["20250801", "20250802", "20250803", "20250804"]

MODEL = """
{{ config(materialized='chain_incremental', schema='hourly', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_partition={'dt': var('dt')},
          partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
          partition_expiration_time='3650 d') }}
select id, v, region, dt from {{ target.schema }}.changes
where dt = '{{ var("dt") }}' and run = {{ var('run', 0) }}
"""


def changes(day: str, run: int, every: int, key: int, v: str) -> list[tuple]:
    """(id, v, region, dt, run): key `key` of every `every`-th group, valued v + the group."""
    return [(key, f"{v}{g}", g, day, run) for i, g in enumerate(GROUPS) if i % every == 0]


# day 1 is the full table (one key a group); each later day changes a subset of the groups
# (an update of key 1, or a key new to the group); the rerun of day 2 replaces its rows
ROWS = {
    (DAYS[0], 0): changes(DAYS[0], 0, 1, 1, "a"),
    (DAYS[1], 0): changes(DAYS[1], 0, 3, 1, "b"),
    (DAYS[2], 0): changes(DAYS[2], 0, 5, 2, "c"),
    (DAYS[3], 0): changes(DAYS[3], 0, 7, 1, "d"),
    (DAYS[1], 1): changes(DAYS[1], 1, 4, 1, "e"),
}


def merged(deltas: list[list[tuple]], anchor: dict | None = None) -> dict:
    """{(region, id): v} of an anchor with deltas applied in order (the later day wins)."""
    out = dict(anchor or {})
    for rows in deltas:
        out.update({(g, i): v for i, v, g, _, _ in rows})
    return out


def as_rows(state: dict) -> list[tuple]:
    return sorted((g, i, v) for (g, i), v in state.items())


def reads(p, schema: str) -> dict[str, list[tuple]]:
    """{day: rows} of every day read through the view, each day its own filtered arm."""
    union = " union all ".join(
        f"select dt, region, id, v from {schema}.t where dt = '{d}'" for d in DAYS
    )
    out: dict[str, list[tuple]] = {d: [] for d in DAYS}
    for row in p.spark.sql(union).collect():
        out[row[0]].append(tuple(row[1:]))
    return {d: sorted(rows) for d, rows in out.items()}


def test_a_chain_of_a_thousand_groups_in_a_redacted_schema(project):
    p = project
    hourly = f"{p.schema}_hourly"
    p.spark.createDataFrame(
        [row for rows in ROWS.values() for row in rows],
        "id int, v string, region string, dt string, run int",
    ).write.saveAsTable(f"{p.schema}.changes")
    p.model("t", MODEL)
    day = [ROWS[(d, 0)] for d in DAYS]
    try:
        # 1. the first run writes the snapshot branch; 2. three delta days
        p.dbt("run", vars={"dt": DAYS[0]})
        for d in DAYS[1:]:
            p.dbt("run", vars={"dt": d})
        s1 = merged([day[0]])
        expected = {d: as_rows(merged(day[1 : i + 1], s1)) for i, d in enumerate(DAYS)}
        assert reads(p, hourly) == expected
        assert len(expected[DAYS[3]]) == 1200  # 1,000 keys 1 and 200 keys 2
        # Spark hides the branches' locations (under `..._hourly.db`); the adapter read mirrors
        props = dict(p.spark.sql(f"SHOW TBLPROPERTIES {hourly}.t__snapshot").collect())
        assert props["chaintable.cumulative-location"] == "*********(redacted)"

        # 3. day 2 again, with other rows: days 2 to 4 read them
        day[1] = ROWS[(DAYS[1], 1)]
        p.dbt("run", vars={"dt": DAYS[1], "run": 1})
        expected = {d: as_rows(merged(day[1 : i + 1], s1)) for i, d in enumerate(DAYS)}
        assert reads(p, hourly) == expected

        # 4. day 3 compacted into the snapshot branch of every group: every read the same
        p.run_op("compact_chain", {"model": "t", "partition": {"dt": DAYS[2]}, "overwrite": True})
        assert "compact_chain" in p.log_text() and "written (result: true)" in p.log_text()
        snaps = sorted(r[0] for r in p.spark.sql(f"SHOW PARTITIONS {hourly}.t__snapshot").collect())
        assert snaps == sorted(f"region={g}/dt={d}" for g in GROUPS for d in DAYS[0:3:2])
        assert reads(p, hourly) == expected

        # 5. one group's delta of day 4 dropped (a full spec): a day in neither branch of a
        # group reads no rows of it (docs/design.md#read-rules); the other groups are as before
        p.run_op(
            "drop_chain_partition",
            {"model": "t", "partition": {"region": "r007", "dt": DAYS[3]}, "branch": "delta"},
        )
        assert ("r007", 1, "dr007") in expected[DAYS[3]]  # r007 changed on day 4
        expected[DAYS[3]] = [r for r in expected[DAYS[3]] if r[0] != "r007"]
        assert reads(p, hourly) == expected

        # 6. expiration with the cutoff at day 4 (2035-08-02 - 3650 d): in every group the
        # snapshots of days 1 and 3 are before it, day 3 stays as the anchor and day 1 goes
        # with the delta of day 2; days 1 and 2 then read nothing (docs/design.md#read-rules)
        p.run_op("expire_chain", {"model": "t", "now": "2035-08-02 00:00:00"})
        assert "dropping 1000 snapshot and 1000 delta partition(s)" in p.log_text()
        expected.update({DAYS[0]: [], DAYS[1]: []})
        assert reads(p, hourly) == expected
    finally:
        p.spark.sql(f"DROP DATABASE IF EXISTS {hourly} CASCADE")
