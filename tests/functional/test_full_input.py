"""chain_input 'full' end to end (docs/design.md#full-state-input): a seeded history of daily full
extracts of two groups, where every held day reads exactly as its latest extract and each delta
partition holds one row per changed key, through runs, a missing group, compaction, expiration,
reruns and a backfill."""

import random

import pytest
from helpers import chain_reads, module_project, node_messages

from dbt.adapters.chaintable.base.keys import stale_from_properties

pytestmark = pytest.mark.xdist_group("full_input")

COLS = "id int, name string, score int, region string, dt string"
MODEL = """
{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_input='full', chain_partition={'dt': var('dt')},
          chain_branch=var('branch', none),
          partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
          partition_expiration_time='3650 d') }}
select id, name, score, region, dt from {{ target.schema }}.extracts where dt = '{{ var("dt") }}'
"""
# a chain without group keys, of CN's extracts: its day is staged in a bare directory and its
# rows checked by the cumulative build
SINGLE = """
{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
          chain_input='full', chain_partition={'dt': var('dt')}) }}
select id, name, score, dt from {{ target.schema }}.extracts
where dt = '{{ var("dt") }}' and region = 'CN'
"""
GROUPS = ("CN", "US")


def fetch(p, sql: str) -> list[tuple]:
    """Rows unsorted (Project.rows sorts, and a NULL does not compare with a string)."""
    return [tuple(r) for r in p.spark.sql(sql.format(s=p.schema)).collect()]


NAMES = ("a", "b", "c", None)


def next_state(rng: random.Random, rows: dict) -> dict:
    """A group's state the day after `rows` ({id: (name, score)}): some keys deleted, some
    inserted, some updated (a NULL set or cleared among them), the rest as they were."""
    out = dict(rows)
    for i in sorted(rows):
        roll = rng.random()
        if roll < 0.15:
            del out[i]
        elif roll < 0.45:
            name, score = rows[i]
            out[i] = (rng.choice(NAMES), score) if rng.random() < 0.5 else (name, None)
    for _ in range(rng.randint(1, 3)):
        out[rng.randint(1, 40)] = (rng.choice(NAMES), rng.choice((None, 1, 2, 3)))
    return out


class History:
    """The extracts given so far ({day: {group: {id: (name, score)}}}), the source table that
    holds them, and what each held day must read ({day: {group: state}}): a group's extract of
    the day, else what the group read the day before when the run added the day (a missing
    extract changes nothing). A rerun of a day changes what that day reads only."""

    def __init__(self, p, seed: int):
        self.p, self.rng = p, random.Random(seed)
        self.extracts: dict = {}
        self.reads: dict = {}

    def extract(self, day: str, groups=GROUPS) -> None:
        """The extract of `day` for `groups`, each the next state of its read the day before."""
        given = {}
        for g in groups:
            prev = self.expected(self.before(day)).get(g, {})
            if not prev:
                prev = {i: (self.rng.choice(NAMES), i % 3) for i in range(1, 16)}
            given[g] = next_state(self.rng, prev)
        self.extracts[day] = given
        rows = [
            (i, n, s, g, d)
            for d, by_group in self.extracts.items()
            for g, state in by_group.items()
            for i, (n, s) in state.items()
        ]
        self.p.table("extracts", COLS, rows)

    def before(self, day: str) -> str | None:
        return max((d for d in self.reads if d < day), default=None)

    def expected(self, day: str | None) -> dict:
        """{group: state} that `day` reads (none before the first day)."""
        return dict(self.reads.get(day, {})) if day else {}

    def run(self, day: str, groups=GROUPS) -> None:
        self.extract(day, groups)
        self.p.dbt("run", "--select", "c", "s", vars={"dt": day})
        self.ran(day)

    def ran(self, day: str) -> None:
        """`day`'s reads once its run published."""
        reads = {**self.expected(self.before(day)), **self.reads.get(day, {})}
        self.reads[day] = {**reads, **self.extracts[day]}

    def check(self) -> None:
        """Every held day reads as expected, through the view and chain_read."""
        p = self.p
        held = sorted(set(p.partitions("c__snapshot")) | set(p.partitions("c__delta")))
        days = sorted({part.split("dt=")[1] for part in held})
        want = {d: {g: s for g, s in self.expected(d).items() if s} for d in days}
        got: dict = {d: {} for d in days}
        for i, n, s, g, d in fetch(p, "select * from {s}.c"):
            got.setdefault(d, {}).setdefault(g, {})[i] = (n, s)
        assert got == want
        # chain_read: NULLs spelt so that the helper's rows sort
        cols = "id, nvl(name, '-'), nvl(score, -1), region"
        read: dict = {d: {} for d in days}
        for d, rows in chain_reads(p, "c", days, cols).items():
            for i, n, s, g in rows:
                read[d].setdefault(g, {})[i] = (None if n == "-" else n, None if s == -1 else s)
        assert read == want
        single: dict = {part.split("=")[1]: {} for part in p.partitions("s__delta")}
        single.update({part.split("=")[1]: {} for part in p.partitions("s__snapshot")})
        for i, n, s, d in fetch(p, "select * from {s}.s"):
            single[d][i] = (n, s)
        assert single == {d: self.expected(d).get("CN", {}) for d in single}

    def changed(self, day: str, group: str, since: str) -> int:
        """Keys whose state differs between `since` and `day` in `group`."""
        old = self.expected(since).get(group, {}) if since != day else {}
        new = self.expected(day).get(group, {})
        return sum(old.get(k) != new.get(k) for k in set(old) | set(new))

    def delta_rows(self) -> dict[str, int]:
        return dict(
            self.p.rows(
                "select concat('region=', region, '/dt=', dt), count(*) from {s}.c__delta "
                "group by region, dt"
            )
        )


@pytest.fixture(scope="module")
def full(spark, spark_root, tmp_path_factory):
    with module_project(spark, spark_root, tmp_path_factory, "full") as p:
        p.model("c", MODEL)
        p.model("s", SINGLE)
        yield History(p, seed=20250801)


def test_every_day_reads_as_its_extract_and_stores_its_changes(full):
    h, p = full, full.p
    h.run("20250801")
    assert p.partitions("c__snapshot") == ["region=CN/dt=20250801", "region=US/dt=20250801"]
    h.run("20250802")
    h.run("20250803", groups=("CN",))  # US has no extract: its day reads as the day before
    h.check()
    assert h.delta_rows() == {
        f"region={g}/dt={d}": h.changed(d, g, h.before(d))
        for d in ("20250802", "20250803")
        for g in GROUPS
        if h.changed(d, g, h.before(d))
    }
    assert p.spark.table(f"{p.schema}.c").columns == ["id", "name", "score", "region", "dt"]
    # a compacted day anchors the next comparison; a day skipped (0804) is a gap
    p.run_op("compact_chain", {"model": "c", "partition": {"dt": "20250803"}})
    h.run("20250805")
    h.run("20250806")
    h.run("20250806")  # a rerun of the newest day compares with the same day before
    h.check()
    assert h.delta_rows() == {
        f"region={g}/dt={d}": h.changed(d, g, h.before(d))
        for d in ("20250802", "20250803", "20250805", "20250806")
        for g in GROUPS
        if h.changed(d, g, h.before(d))
    }
    changes = fetch(
        p,
        "select region, ct__change from "
        + compiled(p, "{{ chain_changes(ref('c'), {'dt': '20250801'}, {'dt': '20250806'}) }}"),
    )
    assert {g: sum(1 for r in changes if r[0] == g) for g in GROUPS} == {
        g: h.changed("20250806", g, "20250801") for g in GROUPS
    }
    p.run_op("expire_chain", {"model": "c", "now": "2035-08-20 00:00:00"})
    assert p.partitions("c__snapshot") == ["region=CN/dt=20250803", "region=US/dt=20250803"]
    h.run("20250807", groups=("US",))
    h.check()


def compiled(p, sql: str) -> str:
    """`sql` (dbt Jinja over model c) compiled, as a subquery."""
    p.file("analyses/q.sql", f"select * from {sql} __q")
    p.dbt("compile", "--select", "q", vars={"dt": "20250801"})
    return "(" + (p.root / "target/compiled/chain_test/analyses/q.sql").read_text() + ") __c"


def test_a_backfill_or_rerun_before_held_days_changes_that_day_only(full):
    """After the first test the chain holds 0803 (a snapshot of each group), 0805, 0806 and
    0807 (CN without an extract). A backfill and reruns of earlier days: each group's next
    held day, a delta, is compared again with the new day and reads as before (CN's 0807
    too, which had no extract); one a snapshot serves is left as it is."""
    h, p = full, full.p
    h.run("20250804")  # a backfill: 0805 of both groups is compared again with it
    assert "'c': the next held day of 2 group(s) is compared again" in p.log_text()
    assert "'s': the next held day of 1 group(s) is compared again" in p.log_text()
    h.check()
    h.run("20250805", groups=("US",))  # CN keeps its 0805, US's 0806 is compared again
    h.check()
    h.run("20250806", groups=("CN",))  # CN's 0807, an empty delta, now holds changes
    h.check()
    assert h.delta_rows() == {
        f"region={g}/dt={d}": h.changed(d, g, h.before(d))
        for d in ("20250803", "20250804", "20250805", "20250806", "20250807")
        for g in GROUPS
        if h.changed(d, g, h.before(d))
    }
    assert h.changed("20250807", "CN", "20250806") > 0
    p.run_op("compact_chain", {"model": "c", "partition": {"dt": "20250805"}})
    h.run("20250804", groups=("CN",))  # CN's 0805 reads its snapshot: nothing else written
    assert "'c': the next held day" not in p.log_text()
    h.check()
    props = dict(r[:2] for r in p.rows("show tblproperties {s}.c__snapshot"))
    assert stale_from_properties(props) == {}


def test_a_snapshot_write_before_a_held_day_is_refused_and_nothing_is_written(full):
    h, p = full, full.p
    before = (p.partitions("c__snapshot"), p.partitions("c__delta"))
    h.extract("20250802")
    res = p.dbt(
        "run", "--select", "c", vars={"dt": "20250802", "branch": "snapshot"}, expect_ok=False
    )
    assert (
        "chain_incremental model 'c': chain_input 'full' cannot write day "
        "region=CN/dt=20250802 to the snapshot branch: the group holds a later day "
        "(region=CN/dt=20250803), whose stored changes were compared with this day's state; "
        "nothing was written"
    ) in node_messages(res)["c"]
    assert (p.partitions("c__snapshot"), p.partitions("c__delta")) == before


CRASH_POINTS = [
    "run.staged",
    "cumulative.unserved",
    "publish.first",
    "publish.done",
    "cumulative.built",
    "run.view",
]


def test_a_rerun_stopped_at_each_step_is_completed_by_the_next_run(full, monkeypatch):
    """0806 again, with both groups, so each one's 0807 is compared again: the run stopped at
    each failpoint in turn (both models), then run again, which recovers what the stopped one
    left. Every held day then reads as its extract (0807 as before) and no scratch table is
    left."""
    h, p = full, full.p
    for point in CRASH_POINTS:
        h.extract("20250806")
        monkeypatch.setenv("CHAINTABLE_FAILPOINT", point)
        try:
            p.dbt("run", "--select", "c", "s", vars={"dt": "20250806"}, expect_ok=False)
        finally:
            monkeypatch.delenv("CHAINTABLE_FAILPOINT")
        assert f"failpoint {point}" in p.log_text()
        p.dbt("run", "--select", "c", "s", vars={"dt": "20250806"})
        if point.startswith("publish."):  # switched, some or all: switched back whole first
            assert "unfinished run published of a write that reads right only whole" in (
                p.log_text()
            )
        h.ran("20250806")
        left = p.rows("show tables in {s} like '*__chain_*'")
        assert [r[1] for r in left if not r[1].endswith("__chain_map")] == [], point
    h.check()
