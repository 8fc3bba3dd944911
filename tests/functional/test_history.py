"""History by business day (docs/design.md#history-by-business-day) through real dbt: chain_changes equals a full diff of the
two days' states read through the view, and chain_history equals the versions that `dbt
snapshot` would record from each day's state read through the view (computed here in Python),
for deduplicate (sequence field and row kinds), partial-update (sequence groups) and aggregation,
each over groups CN and US (a snapshot on day 1, compacted inline on day 4) and EU (delta-only
from day 4, never compacted). The ranges cover groups read for their changed keys only (across
the compaction too: it recorded what it merged), groups read in full (a group that starts
inside the range), a day that is a snapshot, both forms of a day and a group filter. A fourth
chain expires its days before the day 4 compaction, so that a day before it is refused. The
deduplicate chain stores each day's changes (chain_store_changes): its range of two consecutive
days reads them, and must give what the full states give as the others do. One
project, one dbt run a day: the readers and the models that must fail run with the last day."""

from __future__ import annotations

import json

import history_expected as expected
from dbt.artifacts.schemas.results import RunStatus
from helpers import reads_by_part

D = [f"202508{n:02d}" for n in range(1, 6)]
CONFIG = (
    "materialized='chain_incremental', partition_by=['region', 'dt'], "
    "chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'], "
    "chain_partition={'dt': var('dt')}, chain_compaction={'max_chain_length': 3}"
)
# model -> (extra config, source DDL, value columns in table order: the partition columns last)
MODELS: dict[str, tuple[str, str, list[str]]] = {
    "dd": (  # its runs store their changes (history/stored.py): pu and ag read the branches
        "sequence_field='seq', rowkind_field='op', chain_store_changes=true",
        "id int, v string, seq int, op string, region string, dt string",
        ["id", "v", "seq", "op", "region"],
    ),
    "pu": (
        "merge_engine='partial-update', sequence_groups={'g1': ['a'], 'g2': ['b']}",
        "id int, a string, g1 int, b string, g2 int, region string, dt string",
        ["id", "a", "g1", "b", "g2", "region"],
    ),
    "ag": (
        "merge_engine='aggregation', aggregate_functions={'total': 'sum', 'hi': 'max'}",
        "id int, total int, hi int, region string, dt string",
        ["id", "total", "hi", "region"],
    ),
}
N = None
ROWS: dict[str, list[tuple]] = {
    "dd": [
        *[(i, f"a{i}", 1, "+I", "CN", D[0]) for i in range(1, 5)],
        *[(i, f"a{i}", 1, "+I", "US", D[0]) for i in range(1, 4)],
        # an update, a delete, a late row that loses to the anchor (written, no change)
        (1, "b", 2, "+U", "CN", D[1]),
        (2, N, 2, "-D", "CN", D[1]),
        (4, "late", 0, "+U", "CN", D[1]),
        (3, N, 2, "-D", "US", D[1]),
        # a -U/+U pair, a new key, a deleted key back
        (1, "b", 3, "-U", "CN", D[2]),
        (1, "c", 3, "+U", "CN", D[2]),
        (5, "e", 3, "+I", "CN", D[2]),
        (2, "back", 3, "+I", "CN", D[2]),
        (2, "u2", 3, "+U", "US", D[2]),
        (10, "x", 3, "+I", "EU", D[3]),
        # a key inserted and deleted the same day (absent on both days), a new group
        (5, N, 4, "-D", "CN", D[3]),
        (1, "u1", 4, "+U", "US", D[3]),
        (9, "tmp", 4, "+I", "US", D[3]),
        (9, N, 5, "-D", "US", D[3]),
        (11, "y", 4, "+I", "EU", D[3]),
        (3, "c3", 5, "+U", "CN", D[4]),
        (10, N, 5, "-D", "EU", D[4]),
        (2, "late", 1, "+U", "US", D[4]),
    ],
    "pu": [
        (1, "a1", 1, "b1", 1, "CN", D[0]),
        (2, "a2", 1, "b2", 1, "CN", D[0]),
        (3, "a3", 1, "b3", 1, "US", D[0]),
        (1, "a1x", 2, N, N, "CN", D[1]),
        (3, N, N, "b3x", 2, "US", D[1]),
        (2, "old", 0, N, N, "CN", D[2]),  # an older sequence of group g1: no change
        (4, "a4", 1, N, N, "CN", D[2]),
        (10, "e", 1, "f", 1, "EU", D[3]),
        (1, N, N, "b1y", 3, "CN", D[3]),
        (4, N, N, "b4", 1, "CN", D[3]),
        (3, "a3z", 5, N, N, "US", D[4]),
        (10, N, N, "f2", 2, "EU", D[4]),
    ],
    "ag": [
        (1, 10, 5, "CN", D[0]),
        (2, 20, 7, "CN", D[0]),
        (3, 1, 1, "US", D[0]),
        (1, 5, 3, "CN", D[1]),
        (3, 0, 0, "US", D[1]),  # adds nothing: written, no change
        (2, 1, 9, "CN", D[2]),
        (10, 4, 4, "EU", D[3]),
        (1, -5, 1, "CN", D[3]),  # back to day 1's total
        (11, 2, 2, "EU", D[3]),
        (10, 1, 1, "EU", D[4]),
        (3, 2, 0, "US", D[4]),
    ],
}


def day(d: str, form: str) -> str:
    """A day as the macros take it, as Jinja: the partition dict or Paimon's string."""
    return f"{{'dt': '{d}'}}" if form == "dict" else f"'dt={d}'"


# label -> (from, to, Jinja of from, Jinja of to, region filter)
CHANGES = {
    "1-3": (D[0], D[2], day(D[0], "dict"), day(D[2], "dict"), None),
    "2-5": (D[1], D[4], day(D[1], "str"), day(D[4], "str"), None),
    "3-5": (D[2], D[4], day(D[2], "dict"), day(D[4], "str"), None),
    "4-5": (D[3], D[4], day(D[3], "dict"), day(D[4], "dict"), None),
    "1-5": (D[0], D[4], day(D[0], "dict"), day(D[4], "dict"), None),
    "cn": (D[1], D[4], f"{{'dt': '{D[1]}', 'region': 'CN'}}", day(D[4], "dict"), "CN"),
}
HISTORY = {k: CHANGES[k] for k in ("1-3", "3-5", "4-5", "1-5")}


def reader(model: str, macro: str, ranges: dict[str, tuple], cols: list[str]) -> str:
    extra = "ct__change, ct__before" if macro == "chain_changes" else "ct__to_dt"
    return "{{ config(materialized='table') }}\n" + "\nunion all\n".join(
        f"select '{label}' as rng, {', '.join(cols)}, dt, {extra} "
        f"from {{{{ {macro}(ref('{model}'), {start}, {end}) }}}} __r{i}"
        for i, (label, (_, _, start, end, _)) in enumerate(ranges.items())
    )


# model -> (SQL, message its run must fail with)
FAILING = {
    "bad_order": (
        f"select * from {{{{ chain_changes(ref('dd'), 'dt={D[2]}', 'dt={D[1]}') }}}}",
        "from (dt=20250803) must be a day before to (dt=20250802)",
    ),
    "same_day": (
        f"select * from {{{{ chain_history(ref('dd'), 'dt={D[2]}', 'dt={D[2]}') }}}}",
        "must be a day before to",
    ),
    "unknown_day": (
        f"select * from {{{{ chain_changes(ref('dd'), 'dt={D[0]}', 'dt=20250809') }}}}",
        "to day dt=20250809 is not a published day of the chain",
    ),
    "not_chain": (
        f"select * from {{{{ chain_history(target.schema ~ '.src_dd', 'dt={D[0]}', 'dt={D[1]}') }}}}",
        "src_dd' is not a chain table",
    ),
    "expired": (
        f"select * from {{{{ chain_changes(ref('ex'), 'dt={D[1]}', 'dt={D[4]}') }}}}",
        "from day dt=20250802 of region=CN was expired: its oldest readable day is dt=20250804",
    ),
}
# dd again, expiring at the end of each run (no check interval; the 2025 days are older than
# 30 days): once day 4 is compacted, CN's and US's days 1-3 go
EXPIRING = (
    f"{{{{ config({CONFIG}, {MODELS['dd'][0]}, partition_timestamp_pattern='$dt', "
    "partition_timestamp_formatter='yyyyMMdd', partition_expiration_time='30 d') }}\n"
    "select id, v, seq, op, region, dt from {{ target.schema }}.src_dd "
    "where dt = '{{ var(\"dt\") }}'\n"
)


def states(p, model: str, cols: list[str]) -> dict[str, dict[tuple, tuple]]:
    """{day: {(id, region): the key's values}} read through the view, one day at a time (each
    day its own arm of one query, helpers.reads_by_part)."""
    days = reads_by_part(p, model, {d: f"dt = '{d}'" for d in D}, ", ".join(cols))
    region = cols.index("region")
    return {d: {(r[0], r[region]): r for r in rows} for d, rows in days.items()}


def expected_changes(state, start: str, end: str, region: str | None) -> list[tuple]:
    def narrowed(day: str) -> dict[tuple, tuple]:
        return {k: v for k, v in state[day].items() if region in (None, k[1])}

    return expected.changes(narrowed(start), narrowed(end), start, end)


def expected_history(state, start: str, end: str) -> list[tuple]:
    return expected.versions(state, [d for d in D if start <= d <= end])


def by_range(p, table: str) -> dict[str, list[tuple]]:
    out: dict[str, list] = {}
    for r in p.spark.sql(f"select * from {p.schema}.{table}").collect():
        out.setdefault(r[0], []).append(tuple(r)[1:])
    return {k: expected.ordered(v) for k, v in out.items()}


def test_changes_and_history_equal_diffs_and_versions_of_the_days_full_states(project):
    p = project
    for name, (extra, ddl, cols) in MODELS.items():
        p.table(f"src_{name}", ddl, ROWS[name])
        p.model(
            name,
            f"{{{{ config({CONFIG}, {extra}) }}}}\n"
            f"select {', '.join(cols)}, dt from {{{{ target.schema }}}}.src_{name} "
            "where dt = '{{ var(\"dt\") }}'\n",
        )
        p.model(f"{name}_changes", reader(name, "chain_changes", CHANGES, cols))
        p.model(f"{name}_history", reader(name, "chain_history", HISTORY, cols))
    p.model("ex", EXPIRING)
    for name, (sql, _) in FAILING.items():
        p.model(name, sql)
    for d in D[:-1]:
        p.dbt("run", "--select", *MODELS, "ex", vars={"dt": d})
    assert p.partitions("ex__snapshot") == [f"region=CN/dt={D[3]}", f"region=US/dt={D[3]}"]
    res = p.dbt("run", vars={"dt": D[-1]}, expect_ok=False)
    results = {r.node.name: r for r in res.result.results}
    text = p.log_text()
    for name, (_, message) in FAILING.items():
        assert results[name].status == RunStatus.Error, name
        assert message in str(results[name].message) + text, (name, results[name].message)
    for name, (_, _, cols) in MODELS.items():
        for table in (name, f"{name}_changes", f"{name}_history"):
            assert results[table].status == RunStatus.Success, (table, results[table].message)
        # day 4 was compacted for CN and US (3 deltas since the anchor), EU never (2 at most)
        snaps = p.partitions(f"{name}__snapshot")
        assert f"region=CN/dt={D[3]}" in snaps and f"region=US/dt={D[3]}" in snaps
        assert not [s for s in snaps if s.startswith("region=EU")]
        # compaction recorded what they were merged from: ranges across day 4 read CN and US
        # for their changed keys only (chain/lineage.py)
        props = dict(p.rows(f"SHOW TBLPROPERTIES {{s}}.{name}__snapshot"))
        assert sorted(json.loads(props["chaintable.compacted"])) == [
            f"region=CN/dt={D[3]}",
            f"region=US/dt={D[3]}",
        ]
        state = states(p, name, cols)
        assert state[D[0]] and state[D[4]]
        changes = by_range(p, f"{name}_changes")
        for label, (start, end, _, _, region) in CHANGES.items():
            want = expected_changes(state, start, end, region)
            assert changes.get(label, []) == want, (name, label)
        history = by_range(p, f"{name}_history")
        for label, (start, end, _, _, _) in HISTORY.items():
            assert history.get(label, []) == expected_history(state, start, end), (name, label)
    # the cases above are not empty: each engine has changes of every kind over days 1-5
    kinds = {r[-2] for r in by_range(p, "dd_changes")["1-5"]}
    assert kinds == {"insert", "update", "delete"}
    # dd's range 4-5 read the changes its last run stored, of every group (CN and US from
    # their day 4 compaction, EU from its first day); the others read the branches
    compiled = p.root / "target" / "compiled" / "chain_test" / "models"
    dd_sql, pu_sql = ((compiled / f"{m}_changes.sql").read_text() for m in ("dd", "pu"))
    stored = [s for s in dd_sql.split("union all") if f"{p.schema}.dd__changes" in s]
    assert [s.split("'")[1] for s in stored] == ["4-5"]
    assert f"{p.schema}.dd__snapshot" not in stored[0] and "__changes" not in pu_sql
    # each run stored the days of the groups that had a day before: EU's first day (4) has
    # none, and day 4's compaction of CN and US (a snapshot over the day) voided theirs, which
    # day 5's run dropped
    stored_days = sorted(x.rsplit("/", 1)[0] for x in p.partitions("dd__changes"))
    stored_days_want = [D[1], D[2], D[4]]
    want = [f"region={g}/dt={d}" for g in ("CN", "US") for d in stored_days_want]
    want += [f"region=EU/dt={D[4]}"]
    assert stored_days == sorted(want)


STORED = (
    "{{{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'], "
    "sequence_field='seq', chain_partition={{'dt': var('dt')}}, chain_store_changes={on}, "
    "on_schema_change='append_new_columns') }}}}\n"
    "select id, v, seq{extra}, dt from {{{{ target.schema }}}}.src_s "
    "where dt = '{{{{ var(\"dt\") }}}}'\n"
)
# the changes from the day before, as a view: read right after the run that defines it
CHANGED = (
    "{{ config(materialized='view') }}\n"
    "select * from {{ chain_changes(ref('s'), {'dt': var('prev')}, {'dt': var('dt')}) }} c\n"
)


def test_stored_changes_follow_rewrites_schema_changes_and_switching_off(project, monkeypatch):
    """A chain storing its changes (chain_store_changes) and `chg`, a view of chain_changes of
    a day and the day before, run after it: each answer equals the full diff of the two days'
    states read through the view. A day written again in place voids the stored changes of it
    and the later days (whose cumulative partitions keep their stamps: the stored rows would
    tell the old story), so those read the branches until a run stores them again, even when
    the run stopped before its store; a rerun whose day now changes nothing stores nothing; a
    day dropped and written again is no day stored before; a new column creates the table
    again, with it; switched off, by a run or a full refresh, the table goes."""
    p = project
    d = [f"202509{n:02d}" for n in range(1, 6)]
    rows: dict[str, list[tuple]] = {
        d[0]: [(1, "a", 1), (2, "b", 1), (3, "c", 1)],
        d[1]: [(1, "a2", 2), (4, "d", 2)],
        d[2]: [(2, "b3", 3), (4, "d3", 3)],
    }
    state = {"on": "true", "extra": ""}

    def source() -> None:
        p.table(
            "src_s",
            "id int, v string, seq int, w string, dt string",
            [(*r[:3], r[3] if len(r) > 3 else None, day) for day, rs in rows.items() for r in rs],
        )

    def changes(day: str, prev: str, run: str = "s") -> bool:
        """`dbt run` of `run` (the chain) and chg for `day`; asserts chg's rows; whether chg
        reads t__changes."""
        p.model("s", STORED.format(**state))
        p.dbt("run", "--select", *run.split(), "chg", vars={"dt": day, "prev": prev})
        cols = "id, v, seq" + state["extra"]
        days = reads_by_part(p, "s", {x: f"dt = '{x}'" for x in (prev, day)}, cols)
        full = {x: {r[0]: r for r in days[x]} for x in (prev, day)}
        got = p.rows(f"select {cols}, dt, ct__change, ct__before from {{s}}.chg")
        assert expected.ordered(got) == expected.changes(full[prev], full[day], prev, day)
        return f"{p.schema}.s__changes" in p.rows("show create table {s}.chg")[0][0]

    def stopped(day: str) -> None:
        """The chain's run of `day`, stopped after its publish and view, before its store."""
        monkeypatch.setenv("CHAINTABLE_FAILPOINT", "run.view")
        p.dbt("run", "--select", "s", vars={"dt": day}, expect_ok=False)
        monkeypatch.delenv("CHAINTABLE_FAILPOINT")

    source()
    p.model("chg", CHANGED)
    p.model("s", STORED.format(**state))
    p.dbt("run", "--select", "s", vars={"dt": d[0]})
    assert changes(d[1], d[0]) and changes(d[2], d[1])
    # day 2 written again (key 3 appears, key 1 goes back), day 3 now changes key 3; the run
    # stops after its publish, before its store: days 2 and 3 read the branches, not the
    # stored rows their cumulative partitions (same stamps) would still match
    rows[d[1]], rows[d[2]] = [(1, "a", 2), (3, "c2", 2)], [(2, "b3", 3), (3, "c3", 3)]
    source()
    stopped(d[1])
    assert not changes(d[2], d[1], run="") and not changes(d[1], d[0], run="")
    assert changes(d[1], d[0])  # the rerun stores day 2's again and drops day 3's
    assert not changes(d[2], d[1], run="")
    assert changes(d[2], d[1])  # day 3 run again: stored again
    rows[d[2]] = []  # day 3 written again without a change
    source()
    assert changes(d[2], d[1]) and p.rows("select count(*) from {s}.chg") == [(0,)]
    # the newest day dropped, then written again: a new day whose cumulative partition has
    # its old stamp; the changes stored before the drop are not read
    p.run_op("drop_chain_partition", {"model": "s", "partition": {"dt": d[2]}, "branch": "delta"})
    rows[d[2]] = [(1, "a3", 3)]
    source()
    stopped(d[2])
    assert not changes(d[2], d[1], run="")
    assert changes(d[2], d[1])
    # a new column: the table is created again, with it
    rows[d[3]] = [(2, "b4", 4, "x")]
    source()
    state["extra"] = ", w"
    assert changes(d[3], d[2])
    assert "w" in [str(r[0]) for r in p.rows("describe {s}.s__changes")]
    # switched off: chain_changes reads the branches, and the table goes
    rows[d[4]] = [(1, "a5", 5, "y")]
    source()
    state["on"] = "false"
    assert not changes(d[4], d[3])
    assert p.rows("show tables in {s} like 's__changes'") == []
    # on again, then a full refresh that switches it off: the table goes with the branches
    state["on"] = "true"
    assert changes(d[4], d[3])
    state["on"] = "false"
    p.model("s", STORED.format(**state))
    p.dbt("run", "--select", "s", "--full-refresh", vars={"dt": d[0]})
    assert p.rows("show tables in {s} like 's__changes'") == []
