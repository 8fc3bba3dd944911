"""The compaction policy, model config chain_compaction (docs/design.md#compaction-policy), through
real dbt: both modes, both triggers, groups with chains of different lengths, a failing and a
crashed inline compaction, expiration in the same run and the cumulative delta after it. Every
day is read through the view and compared with the state computed here from the source rows."""

from __future__ import annotations

import re

import pytest
from helpers import module_project, node_messages, reads_by_part

# the ratio policy's cases share one history, the failing and crashed compactions another
pytestmark = pytest.mark.xdist_group("compaction_policy")

MODEL = """
{{{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_branch=var('branch', none){extra}) }}}}
select id, v, region, dt from {{{{ target.schema }}}}.changes
where dt = '{{{{ var("dt") }}}}'{where}
"""


def day(n: int) -> str:
    return f"202508{n:02d}"


def expected(rows, region: str, upto: str) -> list[tuple]:
    """A day's full state: per id the row of the latest day up to `upto` (deduplicate)."""
    state: dict[int, str] = {}
    for i, v, r, d in sorted(rows, key=lambda x: x[3]):
        if r == region and d <= upto:
            state[i] = v
    return sorted(state.items())


def reads(p, regions, days, view="t") -> dict[tuple[str, str], list[tuple]]:
    """Every (region, day) read through the view, each its own arm of one union."""
    pairs = [(r, d) for r in regions for d in days]
    wheres = {pair: f"region = '{pair[0]}' and dt = '{pair[1]}'" for pair in pairs}
    return reads_by_part(p, view, wheres, "id, v")


def want(rows, regions, days):
    """What reads() must give: a group's full state on the days it has a partition (a row
    that day: these models have no chain_partition), nothing on the others."""
    written = {(r, d) for _, _, r, d in rows}
    return {
        (r, d): expected(rows, r, d) if (r, d) in written else [] for r in regions for d in days
    }


def snapshots(p, view="t"):
    return p.partitions(f"{view}__snapshot")


def scratch_tables(p, view="t"):
    """The lock and scratch tables (<view>__chain_map, the view's mapping table, is not one)."""
    names = p.spark.sql(f"SHOW TABLES IN {p.schema} LIKE '{view}__chain_*'").collect()
    return sorted(r[1] for r in names if r[1] != f"{view}__chain_map")


def status(p, view="t") -> str:
    p.run_op("chain_status", {"model": view})
    return p.log_text()


# day 1: the full table; CN changes every day, US on days 2, 4 and 5
ROWS = (
    [(i, f"cn{i}", "CN", day(1)) for i in range(1, 5)]
    + [(i, f"us{i}", "US", day(1)) for i in range(1, 4)]
    + [(n, f"cn{n}-{n}", "CN", day(n)) for n in (2, 3, 4, 5)]
    + [(n % 3 + 1, f"us-{n}", "US", day(n)) for n in (2, 4, 5)]
)


def test_inline_length_policy_compacts_each_group_when_its_chain_is_long_enough(project):
    p = project
    p.table("changes", "id int, v string, region string, dt string", ROWS)
    p.model("t", MODEL.format(extra=", chain_compaction={'max_chain_length': 3}", where=""))
    p.dbt("run", vars={"dt": day(1)})
    for n in (2, 3):
        p.dbt("run", vars={"dt": day(n)})
        assert "no compaction due (max_chain_length 3, mode inline)" in p.log_text()
    assert snapshots(p) == [f"region=CN/dt={day(1)}", f"region=US/dt={day(1)}"]

    p.dbt("run", vars={"dt": day(4)})  # CN: 3 deltas since its anchor; US: 2
    log = p.log_text()
    assert f"region=CN: newest day dt={day(4)}: due (chain length 3 >= max_chain_length 3)" in log
    assert f"region=US: newest day dt={day(4)}: not due (chain length 2 < 3)" in log
    assert "compacting 1 group(s) due under chain_compaction" in log
    assert f"region=CN: anchor dt={day(1)} + 3 delta partition(s) -> snapshot dt={day(4)}" in log
    assert "wrote 4 row(s) for region=CN" in log
    # compaction comes after the day is published and the view refreshed
    assert log.index("partition(s) written to the delta branch") < log.index("compacting 1 group")
    assert snapshots(p) == [
        f"region=CN/dt={day(1)}",
        f"region=CN/dt={day(4)}",
        f"region=US/dt={day(1)}",
    ]
    assert p.rows(
        f"select id, v from {{s}}.t__snapshot where region = 'CN' and dt = '{day(4)}'"
    ) == (expected(ROWS, "CN", day(4)))

    p.dbt("run", vars={"dt": day(5)})  # CN: 1 delta after its new anchor; US: 3
    log = p.log_text()
    assert f"region=CN: newest day dt={day(5)}: not due (chain length 1 < 3)" in log
    assert f"region=US: anchor dt={day(1)} + 3 delta partition(s) -> snapshot dt={day(5)}" in log
    assert f"region=US/dt={day(5)}" in snapshots(p)
    days = [day(n) for n in range(1, 6)]
    assert reads(p, ["CN", "US"], days) == want(ROWS, ["CN", "US"], days)

    # chain_status: the policy and every group's verdict; CN day 5 read from the cumulative
    # delta built on the new anchor
    text = status(p)
    assert "compaction policy: max_chain_length 3, mode inline" in text
    assert re.search(rf"region=CN\s+dt={day(5)}\s+1\s+no\s+chain length 1 < 3", text)
    assert re.search(rf"region=US\s+dt={day(5)}\s+0\s+no\s+newest day is a snapshot", text)
    assert re.search(rf"region=CN\s+dt={day(5)}\s+dt={day(4)}\s+1\s+cumulative delta", text)


RATIO = (
    [(i, f"v{i}", "CN", day(1)) for i in range(1, 11)]
    + [(1, "x", "CN", day(2)), (2, "x", "CN", day(2))]  # 2 of 10 keys changed
    + [(2, "y", "CN", day(3)), (3, "y", "CN", day(3))]  # 3 of 10 since the anchor: not > 0.3
    + [(4, "z", "CN", day(4))]  # 4 of 10: due
)


@pytest.fixture(scope="module")
def ratio(spark, spark_root, tmp_path_factory):
    """Days 1 to 3 of RATIO in a model with the cumulative delta (r_true) and one without
    (r_false), one run of both a day."""
    with module_project(spark, spark_root, tmp_path_factory, "ratio") as p:
        p.table("changes", "id int, v string, region string, dt string", RATIO)
        rule = "{'max_cumulative_ratio': 0.3, 'mode': 'deferred'}"
        for cumulative in ("true", "false"):
            extra = f", cumulative_delta={cumulative}, chain_compaction={rule}"
            p.model(f"r_{cumulative}", MODEL.format(extra=extra, where=""))
        for n in (1, 2, 3):
            p.dbt("run", "--threads", "2", vars={"dt": day(n)})  # both models side by side
        yield p


@pytest.mark.parametrize("cumulative", ["true", "false"])
def test_deferred_ratio_policy_is_compacted_by_compact_chain_without_partition(ratio, cumulative):
    """The changed keys are the distinct keys of the newest day's deltas since its anchor, with
    the cumulative delta on or off: the same verdicts."""
    p, m = ratio, f"r_{cumulative}"
    text = status(p, m)
    assert "compaction policy: max_cumulative_ratio 0.3, mode deferred" in text
    assert re.search(
        rf"region=CN\s+dt={day(3)}\s+2\s+no\s+3 changed key\(s\) since the anchor <= 0.3 of 10 "
        r"anchor row\(s\)",
        text,
    )
    p.dbt("run", "--select", m, vars={"dt": day(4)})
    assert "compacting" not in p.log_text()  # deferred: the run compacts nothing
    assert snapshots(p, m) == [f"region=CN/dt={day(1)}"]
    assert re.search(
        rf"region=CN\s+dt={day(4)}\s+3\s+yes\s+4 changed key\(s\) since the anchor > "
        r"max_cumulative_ratio 0.3 of 10 anchor row\(s\)",
        status(p, m),
    )
    p.run_op("compact_chain", {"model": m})
    assert "compact_chain " in p.log_text() and "(result: true)" in p.log_text()
    assert snapshots(p, m) == [f"region=CN/dt={day(1)}", f"region=CN/dt={day(4)}"]
    p.run_op("compact_chain", {"model": m})
    assert "no compaction due (max_cumulative_ratio 0.3, mode deferred)" in p.log_text()
    assert "(result: false)" in p.log_text()
    days = [day(n) for n in range(1, 5)]
    assert reads(p, ["CN"], days, m) == want(RATIO, ["CN"], days)


@pytest.fixture(scope="module")
def policies(spark, spark_root, tmp_path_factory):
    """Day 1 in a model without a policy (t) and in one with a bad policy (bad), one run of
    both: {model: its result's message}."""
    with module_project(spark, spark_root, tmp_path_factory, "policies") as p:
        p.table("changes", "id int, v string, region string, dt string", ROWS)
        p.model("t", MODEL.format(extra="", where=""))
        p.model("bad", MODEL.format(extra=", chain_compaction={'max_chain_length': 0}", where=""))
        p.messages = node_messages(p.dbt("run", vars={"dt": day(1)}, expect_ok=False))
        yield p


def test_compact_chain_without_partition_needs_a_policy(policies):
    p = policies
    assert snapshots(p) == [f"region=CN/dt={day(1)}", f"region=US/dt={day(1)}"]
    p.run_op("compact_chain", {"model": "t"}, expect_ok=False)
    assert (
        f"compact_chain {p.schema}.t: give the partition to compact (e.g. partition: {{dt: "
        "'20250811'}), or configure chain_compaction on the model to compact what it says is due"
    ) in p.log_text()


def test_a_bad_policy_fails_before_anything_is_written(policies):
    p = policies
    assert (
        "chain_incremental model 'bad': chain_compaction max_chain_length must be an integer "
        ">= 1, got 0"
    ) in p.messages["bad"]
    assert p.spark.sql(f"SHOW TABLES IN {p.schema} LIKE 'bad*'").collect() == []


CN = [r for r in ROWS if r[2] == "CN"]
LENGTH_2 = MODEL.format(
    extra=", chain_compaction={'max_chain_length': 2}", where=" and region = 'CN'"
)


@pytest.fixture(scope="module")
def due_next(spark, spark_root, tmp_path_factory):
    """CN with a snapshot and one delta: the next day's run makes its chain 2 long, due; in
    model t for the failing compaction and in model `crash` for the crashed one, one run of
    both a day."""
    with module_project(spark, spark_root, tmp_path_factory, "due_next") as p:
        p.table("changes", "id int, v string, region string, dt string", ROWS)
        p.model("t", LENGTH_2)
        p.model("crash", LENGTH_2)
        for n in (1, 2):
            p.dbt("run", "--threads", "2", vars={"dt": day(n)})  # both models side by side
        yield p


def test_a_failing_inline_compaction_leaves_the_day_published(due_next, monkeypatch):
    p = due_next
    # a statement of the compaction fails (after its rows were staged)
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", "compact.staged:error")
    p.dbt("run", "--select", "t", vars={"dt": day(3)})
    log = p.log_text()
    assert (
        "chain_incremental model 't': the inline compaction failed; the run's delta "
        "partition(s) are published and readable, and the next run (or compact_chain with no "
        "partition) retries what is due: Runtime Error\n  failpoint compact.staged: a statement "
        "failed"
    ) in log
    assert "OK: 1 delta partition(s); compaction failed" in log
    assert snapshots(p) == [f"region=CN/dt={day(1)}"]
    assert scratch_tables(p) == []  # nothing left behind, the lock released
    days = [day(n) for n in (1, 2, 3)]
    assert reads(p, ["CN"], days) == want(CN, ["CN"], days)
    # under --warn-error the failure fails the model; the day stays published all the same
    p.dbt("--warn-error", "run", "--select", "t", vars={"dt": day(3)}, expect_ok=False)
    assert reads(p, ["CN"], days) == want(CN, ["CN"], days)
    assert scratch_tables(p) == []
    monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    # a policy in inline mode is compacted by compact_chain without a partition too
    p.run_op("compact_chain", {"model": "t"})
    assert snapshots(p) == [f"region=CN/dt={day(1)}", f"region=CN/dt={day(3)}"]
    assert reads(p, ["CN"], days) == want(CN, ["CN"], days)


def test_a_crashed_inline_compaction_loses_nothing_and_the_rerun_compacts(due_next, monkeypatch):
    """A crash (CHAINTABLE_FAILPOINT without :error stops as a killed process would: lock held,
    scratch tables left) in the compaction after the day was published."""
    p, m = due_next, "crash"
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", "compact.staged")
    p.dbt("run", "--select", m, vars={"dt": day(3)}, expect_ok=False)
    assert "failpoint compact.staged" in p.log_text()
    monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    assert f"{m}__chain_lock" in scratch_tables(p, m)
    days = [day(n) for n in (1, 2, 3)]
    assert reads(p, ["CN"], days, m) == want(CN, ["CN"], days)  # the day was published
    p.dbt("run", "--select", m, vars={"dt": day(3)})
    assert "breaking the lock" in p.log_text()
    assert snapshots(p, m) == [f"region=CN/dt={day(1)}", f"region=CN/dt={day(3)}"]
    assert scratch_tables(p, m) == []
    assert reads(p, ["CN"], days, m) == want(CN, ["CN"], days)


EXPIRY = [
    (1, "a", "CN", "20250101"),
    (2, "b", "CN", "20250101"),
    (1, "a2", "CN", "20250110"),
    (2, "b3", "CN", "20250201"),
    (3, "c", "CN", "20250215"),
]


def test_compaction_comes_before_expiration_so_the_new_anchor_counts_at_once(project):
    """30 d expiration checked at the end of every run: on 0201 the inline compaction writes
    snapshot 0201, and the same run's expiration then drops snapshot 0101 with delta 0110 (two
    snapshots before the cutoff, the later one kept as the anchor)."""
    p = project
    p.table("changes", "id int, v string, region string, dt string", EXPIRY)
    p.model(
        "t",
        MODEL.format(
            extra=", chain_compaction={'max_chain_length': 2}, "
            "partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd', "
            "partition_expiration_time='30 d'",
            where="",
        ),
    )
    p.dbt("run", vars={"dt": "20250101"})
    p.dbt("run", vars={"dt": "20250110"})
    assert p.partitions("t__delta") == ["region=CN/dt=20250110"]
    p.dbt("run", vars={"dt": "20250201"})
    log = p.log_text()
    assert log.index("compacting 1 group(s)") < log.index("dropping 1 snapshot and 1 delta")
    assert snapshots(p) == ["region=CN/dt=20250201"]
    assert p.partitions("t__delta") == ["region=CN/dt=20250201"]
    assert reads(p, ["CN"], ["20250201"]) == {("CN", "20250201"): [(1, "a2"), (2, "b3")]}
    p.dbt("run", vars={"dt": "20250215"})  # a chain of 1 delta: nothing due, nothing expired
    assert "no compaction due" in p.log_text()
    assert reads(p, ["CN"], ["20250215"]) == {("CN", "20250215"): [(1, "a2"), (2, "b3"), (3, "c")]}


RANDOM_MODEL = """
{{{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
          sequence_field='seq', rowkind_field='op', chain_partition={{'dt': var('dt')}},
          chain_compaction={{'max_cumulative_ratio': 0.3}}, cumulative_delta={on}) }}}}
select id, v, op, seq, dt from {{{{ target.schema }}}}.changes where dt = '{{{{ var("dt") }}}}'
"""


def full_reads(p, view: str) -> list[tuple]:
    """Every day of both branches through the view, in one query."""
    return p.rows(f"select dt, id, v, seq from {{s}}.{view}")


@pytest.mark.parametrize("seed", [4])
def test_ratio_policy_decides_the_same_with_the_cumulative_delta_on_and_off(project, seed):
    """`t` keeps the cumulative delta, `m` does not; one `dbt run` of both per step, over a
    random history of new days, backfills and rewrites. Half the rows come late (a lower
    sequence than the anchor's: the key keeps the anchor's row, and the cumulative delta leaves
    it out), some delete. After every step both compacted the same days, and every day reads
    the same."""
    import random

    p, rng = project, random.Random(seed)
    days = [f"202509{d:02d}" for d in range(1, 13)]
    rows = [(k, f"v{k}", "+I", 50, days[0]) for k in range(1, 13)]
    p.table("changes", "id int, v string, op string, seq int, dt string", rows)
    p.model("t", RANDOM_MODEL.format(on="true"))
    p.model("m", RANDOM_MODEL.format(on="false"))
    p.dbt("run", vars={"dt": days[0]})
    written, used = [days[0]], set()
    kinds = ["new", "new", "new", "backfill", "new", "rewrite", "new", "backfill", "rewrite"]
    for step, kind in enumerate(kinds):
        later = [d for d in days if d > max(written)]
        gaps = [d for d in days if d < max(written) and d not in written]
        if kind == "new":  # sometimes a day skipped, for a backfill to fill
            day = later[int(rng.random() < 0.5)]
        else:
            day = rng.choice(gaps if kind == "backfill" and gaps else written[1:])
        new = []
        for k in rng.sample(range(1, 15), rng.randint(1, 4)):
            late = rng.random() < 0.5
            # late: below every anchor's row; never one sequence twice for a key and day (a run
            # refuses the tie)
            seq = rng.choice([q for q in range(1, 50) if (day, k, q) not in used])
            seq = seq if late else 1000 + 100 * step + k
            used.add((day, k, seq))
            new.append((k, f"v{k}_{step}", rng.choice(["+U", "+U", "+I", "-D"]), seq, day))
        p.spark.createDataFrame(
            new, "id int, v string, op string, seq int, dt string"
        ).write.insertInto(f"{p.schema}.changes")
        p.dbt("run", "--threads", "2", vars={"dt": day})  # t and m side by side
        written.append(day)
        assert snapshots(p, "t") == snapshots(p, "m"), (step, kind, day)
        assert full_reads(p, "t") == full_reads(p, "m"), (step, kind, day)
    compacted = [s for s in snapshots(p, "m") if s != f"dt={days[0]}"]
    assert 2 <= len(compacted) < len(set(written)) - 1, compacted  # some days due, some not
