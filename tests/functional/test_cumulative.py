"""The cumulative delta through real dbt: after every kind of change to a chain's inputs, every
day read through the view and through chain_read equals the same chain read by merge alone
(a twin model with cumulative_delta=false over the same source), and the days whose inputs
did not change, or were rebuilt, are served from the cumulative delta."""

from __future__ import annotations

import json
import re

import pytest
from helpers import chain_reads, state

MODEL = """
{{{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
          sequence_field='seq', rowkind_field='op', chain_partition={{'dt': var('dt')}},
          chain_branch=var('branch', none), on_schema_change='append_new_columns',
          partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
          partition_expiration_time='3650 d', cumulative_delta={on}) }}}}
select {cols} from {{{{ target.schema }}}}.changes where dt = '{{{{ var("dt") }}}}'
"""
COLS = "id, v, op, seq, dt"
DAYS = [f"202508{d:02d}" for d in range(1, 8)]


def rows_of(day: str, n: int) -> list[tuple]:
    """Day n's changes: an update of two keys, an insert, a delete, a late row that loses to a
    newer sequence already in the chain (seq 1), and on day 1 the full table."""
    if n == 1:
        return [(i, f"v{i}", "+I", 10, day) for i in range(1, 9)]
    return [
        (n, f"u{n}", "+U", 10 + n, day),
        (n + 1, f"w{n}", "+U", 10 + n, day),
        (20 + n, f"i{n}", "+I", 10 + n, day),
        ((n + 3) % 8 + 1, None, "-D", 10 + n, day),
        ((n + 5) % 8 + 1, "late", "+U", 1, day),
    ]


@pytest.fixture
def twins(project):
    p = project
    p.table(
        "changes",
        "id int, v string, op string, seq int, dt string",
        [r for n, d in enumerate(DAYS[:5], 1) for r in rows_of(d, n)],
    )
    p.model("t", MODEL.format(on="true", cols=COLS))
    p.model("m", MODEL.format(on="false", cols=COLS))
    for d in DAYS[:4]:
        p.dbt("run", vars={"dt": d})
    return p


# a project macro: one maintenance operation on several models in one run-operation
ON_MODELS = """
{% macro on_models(models, op, args) %}
  {% for model in models %}
    {% if op == 'compact_chain' %}{% do compact_chain(model=model, **args) %}
    {% elif op == 'drop_chain_partition' %}{% do drop_chain_partition(model=model, **args) %}
    {% elif op == 'expire_chain' %}{% do expire_chain(model=model, **args) %}
    {% else %}{% do exceptions.raise_compiler_error('no operation ' ~ op) %}{% endif %}
  {% endfor %}
{% endmacro %}
"""


def on_twins(p, op: str, args: dict) -> None:
    """`op` on t, then on m, in one dbt invocation."""
    p.file("macros/on_models.sql", ON_MODELS)
    p.run_op("on_models", {"models": ["t", "m"], "op": op, "args": args})


def compiled_checks(p, days, cols, reads=("t",), status=("t",)):
    """One dbt compile: each of `reads` read through chain_read on each of `days` (one query per
    model), and chain_status of each of `status`. Returns ({model: {day: rows}}, {model: the
    days chain_status says are read from the cumulative delta}), as helpers.chain_reads and
    helpers.served give them."""
    for model in reads:
        union = " union all ".join(
            f"select '{d}' as __day, {cols} from "
            f"{{{{ chain_read(ref('{model}'), {{'dt': '{d}'}}) }}}} __r{i}"
            for i, d in enumerate(days)
        )
        p.file(f"analyses/reads_{model}.sql", union)
    # a ref under `if execute` is not seen by the parse: each model is named for it first
    refs = "".join(f"-- depends_on: {{{{ ref('{m}') }}}}\n" for m in status)
    calls = "".join(f"{{% do chain_status(relation=ref('{m}')) %}}" for m in status)
    p.file("analyses/status.sql", refs + "{% if execute %}" + calls + "{% endif %}select 1")
    p.dbt(
        "compile",
        "--select",
        "status",
        *(f"reads_{m}" for m in reads),
        vars={"dt": days[-1] if days else DAYS[0]},
    )
    compiled = p.root / "target" / "compiled" / "chain_test" / "analyses"
    got: dict[str, dict[str, list[tuple]]] = {}
    for model in reads:
        got[model] = {d: [] for d in days}
        for row in p.rows((compiled / f"reads_{model}.sql").read_text()):
            got[model][row[0]].append(tuple(row[1:]))
    serving: dict[str, list[str]] = {}
    for msg in p.logs:
        if msg.startswith("chain_status "):
            model = msg.split()[1].split(".")[-1].strip("`")
            found = re.findall(r"dt=(\d{8})\s+dt=\d{8}\s+\d+\s+cumulative delta", msg)
            serving[model] = sorted(set(found))
    assert sorted(serving) == sorted(status), p.log_text()
    return got, serving


def same(p, cols="id, v", twin=False):
    """Every partition read through t's view equals m's (merge on read alone), and through
    t's chain_read too (with `twin`, m's chain_read as well). Returns t's state and the days
    chain_status says t (with `twin`, and m) reads from the cumulative delta."""
    t, m = state(p, "t", cols), state(p, "m", cols)
    assert t == m
    assert any(rows for rows in t.values())
    models = ("t", "m") if twin else ("t",)
    reads, serving = compiled_checks(p, [part.split("=")[1] for part in t], cols, models, models)
    for model in models:
        assert reads[model] == {part.split("=")[1]: rows for part, rows in t.items()}, model
    return t, serving


def served(p, view="t"):
    """The days chain_status says `view` reads from the cumulative delta (one dbt compile)."""
    return compiled_checks(p, [], "", (), (view,))[1][view]


def reads_as(p, view, parts, cols="id, v"):
    """Every partition of `parts` ({'dt=D': rows}) reads through chain_read as those rows, and
    the days chain_status says `view` reads from the cumulative delta (one dbt compile)."""
    days = [part.split("=")[1] for part in parts]
    reads, serving = compiled_checks(p, days, cols, (view,), (view,))
    assert reads[view] == {part.split("=")[1]: rows for part, rows in parts.items()}
    return serving[view]


def test_every_change_keeps_reads_equal_to_merge_on_read(twins):
    """After each change, one check (same): t's view equals m's, t's chain_read equals them,
    and chain_status names the days t serves from the cumulative delta."""
    p = twins
    # m, merged on read alone, serves no day, and its chain_read equals t's
    assert same(p, twin=True)[1] == {"t": DAYS[1:4], "m": []}

    # a delta day written again with other rows: it and the later days are rebuilt
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (7, 'again', '+U', 50, '{DAYS[2]}')")
    p.dbt("run", vars={"dt": DAYS[2]})
    after, serves = same(p)
    assert (7, "again") in after[f"dt={DAYS[3]}"]
    assert serves["t"] == DAYS[1:4]

    # a later day first, then the day before it (a backfill): the later day is rebuilt
    p.spark.sql(
        f"INSERT INTO {p.schema}.changes VALUES "
        + ", ".join(
            f"({r[0]}, {'NULL' if r[1] is None else repr(r[1])}, '{r[2]}', {r[3]}, '{r[4]}')"
            for r in rows_of(DAYS[5], 6)
        )
    )
    p.dbt("run", vars={"dt": DAYS[5]})
    p.dbt("run", vars={"dt": DAYS[4]})
    assert same(p)[1]["t"] == DAYS[1:6]

    # compaction of a middle day: the later days get a new anchor and are rebuilt on it
    on_twins(p, "compact_chain", {"partition": {"dt": DAYS[3]}})
    assert same(p)[1]["t"] == DAYS[1:3] + DAYS[4:6]
    # and again with overwrite (a snapshot rewritten in place)
    on_twins(p, "compact_chain", {"partition": {"dt": DAYS[3]}, "overwrite": True})
    assert same(p)[1]["t"] == DAYS[1:3] + DAYS[4:6]

    # a snapshot written by the model itself at a day that has deltas after it
    p.dbt("run", vars={"dt": DAYS[4], "branch": "snapshot"})
    assert same(p)[1]["t"] == DAYS[1:3] + DAYS[5:6]

    # a delta partition dropped: the days read through it are read by merge
    on_twins(p, "drop_chain_partition", {"partition": {"dt": DAYS[1]}, "branch": "delta"})
    assert same(p)[1]["t"] == DAYS[5:6]

    # expiration: the dropped days' cumulative partitions go with them
    on_twins(p, "expire_chain", {"now": "2035-08-10 00:00:00"})
    after = same(p)[0]
    assert f"dt={DAYS[0]}" not in after
    assert {
        r[0].split("/")[0]
        for r in p.spark.sql(f"SHOW PARTITIONS {p.schema}.t__cumulative").collect()
    } == {f"dt={DAYS[5]}"}

    # a new column: every day's inputs read differently, new days are built with it; m's
    # chain_read reads every day as t's
    p.model("t", MODEL.format(on="true", cols=COLS + ", 'x' as w"))
    p.model("m", MODEL.format(on="false", cols=COLS + ", 'x' as w"))
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (3, 'z', '+U', 90, '{DAYS[6]}')")
    p.dbt("run", vars={"dt": DAYS[6]})
    assert same(p, "id, v, w", twin=True)[1] == {"t": DAYS[6:7], "m": []}
    # a day without changes after it: its empty cumulative partition is written by column name
    # (the new column comes after the mask column in t__cumulative)
    p.dbt("run", vars={"dt": "20250808"})
    assert same(p, "id, v, w")[1]["t"] == [*DAYS[6:7], "20250808"]

    # a full refresh starts the chain again, cumulative delta included
    p.dbt("run", "--full-refresh", vars={"dt": DAYS[0]})
    p.dbt("run", vars={"dt": DAYS[1]})
    assert same(p, "id, v, w")[1]["t"] == DAYS[1:2]


def test_a_cumulative_table_without_the_mask_column_is_altered_and_rebuilt(twins):
    """A t__cumulative created before it had the mask column (docs/design.md, mask rows): the
    next run adds the column, records it, and serves the new day from partitions with masks."""
    p = twins
    c = f"{p.schema}.t__cumulative"
    p.spark.sql(f"DROP TABLE {c}")
    p.spark.sql(
        f"CREATE TABLE {c} (id int, v string, op string, seq int, dt string, ct__stamp string) "
        "USING parquet PARTITIONED BY (dt, ct__stamp)"
    )
    p.spark.sql(
        f"ALTER TABLE {p.schema}.t__snapshot UNSET TBLPROPERTIES ('chaintable.cumulative-layout')"
    )
    p.dbt("run", vars={"dt": DAYS[4]})
    assert "ALTER TABLE" in p.log_text() and "ADD COLUMNS (`ct__mask` bigint)" in p.log_text()
    assert [r[0] for r in p.spark.sql(f"DESCRIBE {c}").collect()][:6] == [
        "id",
        "v",
        "op",
        "seq",
        "ct__mask",
        "dt",
    ]
    props = dict(p.spark.sql(f"SHOW TBLPROPERTIES {p.schema}.t__snapshot").collect())
    assert props["chaintable.cumulative-layout"] == "mask"
    assert same(p)[1]["t"] == DAYS[4:5]
    # every key of the day's partition lies in block 0 (ids 1-25): one mask, their bits
    ids = [r[0] for r in p.rows(f"select id from {c}")]
    assert len(ids) >= 10 and max(ids) < 64
    assert p.rows(f"select min(id), ct__mask from {c} where ct__mask is not null group by 2") == [
        (min(ids), sum(1 << i for i in ids))
    ]
    p.dbt("run", vars={"dt": DAYS[4]})  # again: nothing left to alter
    assert "ADD COLUMNS" not in p.log_text()
    same(p)


def anchor_record(p) -> dict[str, tuple[bool, str, int]]:
    """t__snapshot's record of the anchors' highest sequence: per partition, whether its token
    is the partition's current one, the sequence field and kind, the highest sequence."""
    props = dict(p.spark.sql(f"SHOW TBLPROPERTIES {p.schema}.t__snapshot").collect())
    tokens = json.loads(props.get("chaintable.snapshot-generations", "{}"))
    record = json.loads(props["chaintable.anchor-sequence"])
    return {k: (t == tokens.get(k), field, high) for k, (t, field, high) in record.items()}


def test_a_day_whose_sequences_all_follow_the_anchor_is_built_without_reading_it(project):
    """deduplicate with a sequence field: when every row of the day's delta has a sequence above
    the anchor's highest, no anchor row can win, so the build leaves the anchor out (the
    anchor's highest comes from t__snapshot's record, whose entry counts while the partition
    keeps the token a publish gave it).
    A late row, a rewritten anchor with higher sequences and a NULL sequence each bring the
    anchor back; every day reads as the twin merged on read."""
    p = project
    snap_seq = {1: 10, 2: 10, 3: 10, 4: 10}
    p.table(
        "changes",
        "id int, v string, op string, seq int, dt string",
        [(i, f"a{i}", "+I", s, DAYS[0]) for i, s in snap_seq.items()]
        + [(1, "b1", "+U", 20, DAYS[1]), (5, "b5", "+I", 21, DAYS[1]), (2, None, "-D", 22, DAYS[1])]
        # key 3's row is late (5 < the anchor's 10): the anchor's row wins
        + [(3, "late", "+U", 5, DAYS[2]), (4, "c4", "+U", 30, DAYS[2])],
    )
    p.model("t", MODEL.format(on="true", cols=COLS))
    p.model("m", MODEL.format(on="false", cols=COLS))
    anchorless = "1 without reading the anchor"

    def run(day: str, **extra) -> str:
        # one invocation: m (merged on read alone) logs no cumulative build
        p.dbt("run", "--select", "m", "t", vars={"dt": day, **extra})
        return p.log_text()

    run(DAYS[0], branch="snapshot")
    props = dict(p.spark.sql(f"SHOW TBLPROPERTIES {p.schema}.t__snapshot").collect())
    assert "chaintable.anchor-sequence" not in props  # recorded when a build needs it
    assert anchorless in run(DAYS[1])
    assert anchor_record(p) == {f"dt={DAYS[0]}": (True, "seq:int", 10)}
    log = run(DAYS[2])
    assert "cumulative delta of 1 day(s) built (1 from the day before)" in log
    assert anchorless not in log
    days, serves = same(p)
    assert days[f"dt={DAYS[2]}"] == [(1, "b1"), (3, "a3"), (4, "c4"), (5, "b5")]
    assert serves["t"] == DAYS[1:3]

    # the anchor written again with higher sequences: its publish gives it a new token first,
    # so the record counts for nothing and the next day, whose sequences lie between the old and the new highest,
    # is built with the anchor (and loses to it)
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (1, 'z1', '+I', 100, '{DAYS[0]}')")
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (1, 'd1', '+U', 50, '{DAYS[3]}')")
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (6, 'd6', '+I', 51, '{DAYS[3]}')")
    run(DAYS[0], branch="snapshot")
    log = run(DAYS[3])
    assert anchorless not in log
    days = same(p)[0]
    assert (1, "z1") in days[f"dt={DAYS[3]}"] and (6, "d6") in days[f"dt={DAYS[3]}"]
    assert anchor_record(p) == {f"dt={DAYS[0]}": (True, "seq:int", 100)}

    # a NULL sequence in the day's delta: not known to follow the anchor
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (7, 'e7', '+I', NULL, '{DAYS[4]}')")
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (2, 'e2', '+I', 200, '{DAYS[4]}')")
    assert anchorless not in run(DAYS[4])
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (3, 'f3', '+U', 300, '{DAYS[5]}')")
    assert anchorless in run(DAYS[5])
    # m's chain_read reads every day as t's
    days = same(p, twin=True)[0]
    assert days[f"dt={DAYS[5]}"] == [
        (1, "z1"),
        (2, "e2"),
        (3, "f3"),
        (4, "c4"),
        (5, "b5"),
        (6, "d6"),
        (7, "e7"),
    ]


GROUPED = """
{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          sequence_field='seq', rowkind_field='op', chain_partition=var('spec'),
          cumulative_delta=@ON@) }}
select id, v, op, seq, region, dt from {{ target.schema }}.changes
where dt = '{{ var("spec")["dt"] }}'
{% if var("spec").get("region") %} and region = '{{ var("spec")["region"] }}' {% endif %}
"""


def test_a_change_in_one_group_rebuilds_only_that_groups_days(project):
    """Groups have their own chains: a delta rewritten in one group rebuilds that group's
    cumulative partitions from that day on and leaves the other group's as they were (the same
    files); every partition reads through the view and through chain_read as merged on read."""
    p = project
    p.table(
        "changes",
        "id int, v string, op string, seq int, region string, dt string",
        [
            (*r[:4], g, r[4])
            for g in ("CN", "EU")
            for n, d in enumerate(DAYS[:4], 1)
            for r in rows_of(d, n)
        ],
    )
    p.model("t", GROUPED.replace("@ON@", "true"))
    p.model("m", GROUPED.replace("@ON@", "false"))
    for d in DAYS[:4]:
        p.dbt("run", vars={"spec": {"dt": d}})
    cols = "region, id, v"

    def files(region: str) -> dict[str, set[str]]:
        rows = p.spark.sql(
            f"SELECT dt, _metadata.file_path FROM {p.schema}.t__cumulative WHERE region = '{region}'"
        ).collect()
        out: dict[str, set[str]] = {}
        for dt, name in rows:
            out.setdefault(dt, set()).add(name)
        return out

    def check() -> dict[str, list[tuple]]:
        t, m = p.full_state("t", cols), p.full_state("m", cols)
        assert t == m
        by_day: dict[str, list[tuple]] = {}
        for part, rows in t.items():
            by_day.setdefault(part.split("dt=")[1], []).extend(rows)
        assert chain_reads(p, "t", DAYS[:4], cols) == {d: sorted(r) for d, r in by_day.items()}
        return t

    check()
    cn, eu = files("CN"), files("EU")
    assert sorted(cn) == sorted(eu) == DAYS[1:4]

    # CN's day 2 written again: CN's days 2-4 are rebuilt, EU's cumulative files stay
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (7, 'again', '+U', 50, 'CN', '{DAYS[1]}')")
    # one invocation: m (merged on read alone) logs no cumulative build
    p.dbt("run", "--select", "m", "t", vars={"spec": {"region": "CN", "dt": DAYS[1]}})
    assert "cumulative delta of 3 day(s) built" in p.log_text()
    after = check()
    for d in DAYS[1:4]:
        assert ("CN", 7, "again") in after[f"region=CN/dt={d}"]
        assert all(r[2] != "again" for r in after[f"region=EU/dt={d}"])
    assert files("EU") == eu
    rebuilt = files("CN")
    assert sorted(rebuilt) == DAYS[1:4] and all(rebuilt[d].isdisjoint(cn[d]) for d in DAYS[1:4])


def test_a_day_that_changes_no_key_is_served_from_an_empty_partition(project):
    """A day's cumulative partition is written whether or not it gets rows: a day with no
    changes right after the anchor, and a day whose only row is late (it loses to the anchor's
    row, so no key changes), are served from empty partitions and read as the anchor."""
    p = project
    p.table(
        "changes",
        "id int, v string, op string, seq int, dt string",
        [(1, "a1", "+I", 10, DAYS[0]), (2, "a2", "+I", 10, DAYS[0])]
        + [(1, "late", "+U", 5, DAYS[2])]
        + [(2, "d2", "+U", 20, DAYS[3])],
    )
    p.model("t", MODEL.format(on="true", cols=COLS))
    for day in DAYS[:4]:
        p.dbt("run", vars={"dt": day})
    # every partition with its rows (none: no row in the count)
    counts = {part.split("/")[0]: 0 for part in p.partitions("t__cumulative")}
    counts.update(p.rows("select concat('dt=', dt), count(*) from {s}.t__cumulative group by dt"))
    assert counts == {f"dt={DAYS[1]}": 0, f"dt={DAYS[2]}": 0, f"dt={DAYS[3]}": 1}
    anchor = [(1, "a1"), (2, "a2")]
    expected = {
        f"dt={DAYS[0]}": anchor,
        f"dt={DAYS[1]}": anchor,
        f"dt={DAYS[2]}": anchor,
        f"dt={DAYS[3]}": [(1, "a1"), (2, "d2")],
    }
    assert state(p, "t") == expected
    assert reads_as(p, "t", expected) == DAYS[1:4]


def test_switched_off_and_on_again_the_cumulative_delta_is_created_again(twins):
    """cumulative_delta=false drops t__cumulative; switched on again, the next run creates it
    again (t__snapshot still records the layout) and serves its day."""
    p = twins
    assert served(p) == DAYS[1:4]
    p.model("t", MODEL.format(on="false", cols=COLS))
    p.dbt("run", vars={"dt": DAYS[4]})
    assert not p.spark.catalog.tableExists(f"{p.schema}.t__cumulative")
    assert served(p) == []
    p.model("t", MODEL.format(on="true", cols=COLS))
    p.dbt("run", vars={"dt": DAYS[5]})
    assert "building the cumulative delta failed" not in p.log_text()
    assert same(p)[1]["t"] == DAYS[5:6]


def test_a_daily_run_checks_its_rows_as_it_builds_the_cumulative_delta(project):
    """Once the cumulative table exists, a daily run of a new day reads its staged rows once:
    in the cumulative build, which fails on a row the checks refuse and on tied rows (here
    below the key's winning row, where the rank alone would hide them). The run then names
    the row as any run does and writes nothing. A row at or below the anchor's highest
    sequence fails the build too: that day is checked and built after the publish as before."""
    p = project
    base = [(1, "a", "+I", 1, DAYS[0]), (2, "b", "+I", 1, DAYS[0]), (3, "c", "+I", 1, DAYS[0])]
    base += [(1, "a1", "+U", 5, DAYS[1]), (2, "b2", "+U", 6, DAYS[2]), (4, "d", "+I", 6, DAYS[2])]
    cols = "id int, v string, op string, seq int, dt string"
    p.table("changes", cols, base)
    p.model("t", MODEL.format(on="true", cols=COLS))
    p.dbt("run", vars={"dt": DAYS[0], "branch": "snapshot"})
    p.dbt("run", vars={"dt": DAYS[1]})
    checked = "its rows checked as its cumulative delta is built"
    assert checked not in p.log_text()  # the cumulative table is created by this run
    p.dbt("run", vars={"dt": DAYS[2]})
    assert checked in p.log_text()
    assert "(1 from the day before; 1 without reading the anchor" in p.log_text()
    expected = {
        f"dt={DAYS[0]}": [(1, "a"), (2, "b"), (3, "c")],
        f"dt={DAYS[1]}": [(1, "a1"), (2, "b"), (3, "c")],
        f"dt={DAYS[2]}": [(1, "a1"), (2, "b2"), (3, "c"), (4, "d")],
    }
    assert state(p, "t") == expected
    assert reads_as(p, "t", expected) == DAYS[1:3]
    deltas, cumulative = p.partitions("t__delta"), p.partitions("t__cumulative")

    day = DAYS[3]
    refused = [
        (
            [(5, "x", "+I", 9, day), (5, "e", "+I", 7, day), (5, "e2", "+U", 7, day)],
            f"2 rows for key (id=5, dt='{day}', seq=7) in one partition with the same "
            "sequence value",
        ),
        ([(6, "n", "+I", 7, day), (None, "n", "+I", 7, day)], "NULL in primary key column(s)"),
        (
            [(6, "k", "X", 7, day)],
            "rowkind_field 'op' must be one of ['+I', '-U', '+U', '-D'], got 'X' for key (id=6",
        ),
    ]
    for rows, message in refused:
        p.table("changes", cols, base + rows)
        p.dbt("run", vars={"dt": day}, expect_ok=False)
        assert message in p.log_text() and "nothing was written" in p.log_text()
        assert checked in p.log_text()  # found by the build, named by the stage's checks
        assert (p.partitions("t__delta"), p.partitions("t__cumulative")) == (deltas, cumulative)
        assert state(p, "t") == expected

    # a late row (sequence 0, below the anchor's highest 1): the anchor's row of key 3 wins
    p.table("changes", cols, base + [(3, "late", "+U", 0, day), (1, None, "-D", 8, day)])
    p.dbt("run", vars={"dt": day})
    assert "1 partition(s) with rows, 0 empty partition(s)" in p.log_text()
    assert "without reading the anchor" not in p.log_text()
    expected[f"dt={day}"] = [(2, "b2"), (3, "c"), (4, "d")]
    # a day without rows: checked as it is built, the same state as the day before
    p.dbt("run", vars={"dt": DAYS[4]})
    assert checked in p.log_text()
    expected[f"dt={DAYS[4]}"] = expected[f"dt={day}"]
    assert state(p, "t") == expected
    assert reads_as(p, "t", expected) == DAYS[1:5]
