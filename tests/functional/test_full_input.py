"""chain_input 'full' end to end (docs/design.md#full-state-input): a seeded history of daily full
extracts of two groups, where every held day reads exactly as its latest extract and each delta
partition holds one row per changed key, through runs, a missing group, compaction, expiration,
reruns and a backfill."""

import random

import pytest
from helpers import chain_reads, module_project, node_messages

pytestmark = pytest.mark.xdist_group("full_input")

COLS = "id int, name string, score int, region string, dt string"
MODEL = """
{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_input='full', chain_partition={'dt': var('dt')},
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
    holds them, and what each held day must read."""

    def __init__(self, p, seed: int):
        self.p, self.rng, self.extracts = p, random.Random(seed), {}

    def extract(self, day: str, groups=GROUPS, base: str | None = None) -> None:
        """The extract of `day` for `groups`, each the next state of its read on `base`
        (default: the latest day before `day`)."""
        given = {}
        for g in groups:
            prev = self.expected(base or self.before(day)).get(g, {}) if self.extracts else {}
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

    def before(self, day: str) -> str:
        return max((d for d in self.extracts if d < day), default=day)

    def expected(self, day: str) -> dict:
        """{group: state} of `day`: each group as its latest extract on or before it."""
        out = {}
        for d in sorted(d for d in self.extracts if d <= day):
            out.update(self.extracts[d])
        return out

    def run(self, day: str, groups=GROUPS, base: str | None = None) -> None:
        self.extract(day, groups, base)
        self.p.dbt("run", "--select", "c", "s", vars={"dt": day})

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


def test_a_day_before_a_held_one_is_refused_and_nothing_is_written(full):
    h, p = full, full.p
    before = (p.partitions("c__snapshot"), p.partitions("c__delta"))
    h.extract("20250804")
    res = p.dbt("run", "--select", "c", vars={"dt": "20250804"}, expect_ok=False)
    del h.extracts["20250804"]
    assert (
        "chain_incremental model 'c': chain_input 'full' cannot write day "
        "region=CN/dt=20250804: the group holds a later day (region=CN/dt=20250805), whose "
        "stored changes were compared with this day's state; nothing was written"
    ) in node_messages(res)["c"]
    assert (p.partitions("c__snapshot"), p.partitions("c__delta")) == before
