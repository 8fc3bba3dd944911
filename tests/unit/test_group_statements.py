"""How many statements a daily run and a compaction send as a chain's groups grow (a chain per
`region` value): each is a Spark round trip (catalog work in the metastore, on a Thrift Server a
network one), so what a run sends per group is listed here by kind and pinned. `statement_kinds`
and `daily_runs` are the harness: `python -m tests.unit.test_group_statements` prints the
kinds for 1, 4 and 16 groups."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.keys import DEFAULT_VIEW_RECENT
from dbt.adapters.chaintable.base.partitions import default_partition_directory
from dbt.adapters.chaintable.publish import safety
from tests.unit.fake_catalog import FakeConnections, fake_adapter
from tests.unit.test_golden_sql import COLUMNS, chain, deterministic  # noqa: F401 (its autouse fixture)
from tests.unit.test_golden_sql import CONFIG as GOLDEN_CONFIG

# the golden chain's configuration and columns, without expiration (a daily run's own work only)
CONFIG = {k: v for k, v in GOLDEN_CONFIG.items() if k != "partition_expiration_time"}
KIND = re.compile(
    r"ALTER TABLE \S+ (?:ADD|DROP IF EXISTS|PARTITION|(?:UN)?SET TBLPROPERTIES)"
    r"|DESCRIBE FORMATTED \S+ PARTITION|DESCRIBE \w+(?: \S+)?|SHOW \w+(?: \S+)?"
    r"|INSERT OVERWRITE TABLE \S+ PARTITION \([^)]*=|INSERT \w+ (?:TABLE |DIRECTORY )?\S+"
    r"|(?:CREATE|ALTER|DROP)(?: OR REPLACE)? (?:TABLE|VIEW)(?: IF (?:NOT )?EXISTS)? \S+|SELECT"
)


def statement_kinds(statements: list[str]) -> Counter[str]:
    """Statements by kind: the statement's head, without its values (a per-partition statement
    is one kind however many partitions there are)."""
    kinds: Counter[str] = Counter()
    for s in statements:
        m = KIND.match(s.strip())
        kind = m.group(0) if m else s.strip()[:40]
        if kind == "SELECT" and "count_if(" in s:
            kind = "SELECT (the stage's checks)"
        kinds[re.sub(r"RUN\d+|'[^']*'", "", kind)] += 1
    return kinds


def _cumulative_write(sql: str) -> list[str]:
    """The cumulative partitions a dynamic write of a day's groups gives: one per group."""
    day = re.search(r"'(\d{8})' AS `dt`", sql)
    stamps = re.findall(r"WHEN \(`region` = '(\w+)'\) THEN '(\w+)'", sql)
    return [f"region={r}/dt={day.group(1)}/ct__stamp={s}" for r, s in stamps] if day else []


def _chain(groups: int, days: int) -> tuple[FakeConnections, Any, Any, list[str]]:
    conns = FakeConnections()
    regions = [f"g{i:02d}" for i in range(groups)]
    deltas = [(r, f"202501{d:02d}") for r in regions for d in range(2, days + 1)]
    branches = {"snapshot": [(r, "20250101") for r in regions], "delta": deltas}
    chain(conns, DEFAULT_VIEW_RECENT, CONFIG, branches=branches)
    conns.query_columns = list(COLUMNS)
    conns.dynamic_writes["s.t__cumulative"] = _cumulative_write
    adapter = fake_adapter(conns)
    rel = adapter.Relation.create(schema="s", identifier="t", type="view")
    adapter.cached_relation = lambda database, schema, identifier: rel
    return conns, adapter, rel, regions


def daily_runs(groups: int, runs: int = 3, days: int = 4) -> tuple[Any, list[list[str]]]:
    """`runs` daily runs (`chain_partition: {dt: <day>}`) after day `days` of a chain whose
    `groups` groups each have a snapshot on day 1 and deltas since, every group with rows on
    each day; the statements of each run. The first builds the cumulative delta, the second
    records the anchors' highest sequence: the third is the steady state."""
    conns, adapter, rel, regions = _chain(groups, days)
    sent = []
    for d in range(days + 1, days + 1 + runs):
        day = f"202501{d:02d}"
        conns.statements.clear()
        conns.answers.clear()
        conns.answer("count_if(", [(r, day, 3, 3, 0, 0, 0, False, 7, 0) for r in regions])
        conns.answer("max(CAST(", [(r, "20250101", 5) for r in regions])
        conns.query_partitions = [f"region={r}/dt={day}" for r in regions]
        config = {**CONFIG, "chain_partition": {"dt": day}}
        run = adapter.chain_prepare(rel, "t", config, False, False)
        assert adapter.chain_execute(run, "SELECT * FROM s.src").message == (
            f"OK: {groups} delta partition(s)"
        )
        sent.append(list(conns.statements))
    return (conns, adapter, rel), sent


def compaction(groups: int, day: str = "20250104") -> list[str]:
    """A compaction of `day` (every group has a delta there) after one daily run; its
    statements. Each group's merge leaves rows, so the pub table's write gives every partition."""
    (conns, adapter, rel), _ = daily_runs(groups, runs=1)
    conns.dynamic_writes["s.t__chain_pub"] = lambda sql: [
        f"region=g{i:02d}/dt={day}" for i in range(groups)
    ]
    conns.statements.clear()
    conns.answers.clear()
    assert adapter.chain_compact(rel, {"dt": day}) is True
    return list(conns.statements)


def per_group_kinds(statements: list[str], groups: int) -> dict[str, int]:
    return {k: n for k, n in statement_kinds(statements).items() if n >= groups}


@pytest.mark.parametrize("groups", [1, 4, 16])
def test_a_daily_runs_statements_by_number_of_groups(groups):
    """27, 26 and 24 statements whatever the groups: two of them read the lock's owner from
    the catalog, before the publish and before the lock is dropped, so that a writer whose lock
    another took acts on nothing, and one lists the snapshot branch before the run chooses its
    branch, so that a run after `dbt run --empty` (branches without partitions) is a first load
    (24, 23 and 21 before; before that 24, 26, 24 with 4 groups and 24,
    38, 36 with 16; earlier still 27, 29, 27 and 39, 53, 51). The first run builds the
    cumulative delta (and the view over it), the second records the anchors' highest
    sequence; the third is every day after. One group stages in a bare directory; more stage
    in a table, whose partitions are published at the directories its writes gave them,
    without asking. The anchors' recorded highest sequence is read with the snapshot branch's
    properties and checked against each partition's token there, not against its location
    (one DESCRIBE per group before). One count of the
    rows written, for run_results' rows_affected, whatever the groups (README: dbt
    conventions)."""
    _, sent = daily_runs(groups)
    assert [len(s) for s in sent] == [27, 26, 24]
    if groups > 1:
        assert per_group_kinds(sent[-1], groups) == {}
    stage_writes = [s.split(" PARTITION")[0] for run in sent for s in run if " PARTITION" in s]
    assert not [s for s in stage_writes if "t__chain_stage" in s]


@pytest.mark.parametrize("groups", [4, 16])
def test_a_daily_runs_publish_names_every_groups_partition_in_one_statement(groups):
    _, sent = daily_runs(groups)
    for i, statements in enumerate(sent):
        day = f"202501{5 + i:02d}"
        (add,) = [s for s in statements if s.startswith("ALTER TABLE s.t__delta ADD")]
        stage = next(
            s.split("LOCATION '")[1].split("'")[0]
            for s in statements
            if s.startswith("CREATE TABLE s.t__chain_stage")
        )
        assert add == "ALTER TABLE s.t__delta ADD " + " ".join(
            f"PARTITION (`region` = 'g{g:02d}', `dt` = '{day}') "
            f"LOCATION '{stage}/region=g{g:02d}/dt={day}'"
            for g in range(groups)
        )


@pytest.mark.parametrize(("groups", "count"), [(1, 32), (4, 33), (16, 33)])
def test_a_compactions_statements_by_number_of_groups(groups, count):
    """(30, 31 and 31 before the lock's owner was read before the publish and the release; 27,
    31 and 43 before that; 28, 35 and 59 before that.) Its pub table's partitions are
    published at the directories its write gave them, and the new anchors' highest sequence,
    from the compaction's scan, is recorded without asking where each anchor is (one DESCRIBE
    per group before). Per publish, two more statements read and write the partitions'
    tokens (P_SNAPSHOT_GENERATIONS); one after it records what the partitions were merged
    from (P_COMPACTED, from the properties the publish read)."""
    statements = compaction(groups)
    assert len(statements) == count
    assert not [s for s in statements if s.startswith("DESCRIBE FORMATTED s.t__chain_pub")]
    if groups == 16:  # (with 4, the lock's and the refresh's 4 SHOW TABLES would count)
        assert per_group_kinds(statements, groups) == {}
    if groups > 1:
        (add,) = [s for s in statements if s.startswith("ALTER TABLE s.t__snapshot ADD")]
        assert add.count("PARTITION (") == groups
        assert all(f"region=g{g:02d}/dt=20250104'" in add for g in range(groups))


@pytest.mark.parametrize(
    ("columns", "values", "directory"),
    [
        (("region", "dt"), ("CN", "20250105"), "file:/w/t/_chain_v/R/region=CN/dt=20250105"),
        (("dt",), ("2025-01-05",), "file:/w/t/_chain_v/R/dt=2025-01-05"),
        (("dt",), ("v1.2_a",), "file:/w/t/_chain_v/R/dt=v1.2_a"),
        (("dt",), ("2025-01-05 10:00:00",), None),  # ':' is escaped in a path
        (("dt",), ("a/b",), None),
        (("dt",), ("a%b",), None),
        (("dt",), ("",), None),  # Hive's default partition
        (("Region", "dt"), ("CN", "1"), None),  # Hive lowercases the name in the path
        (("region", "DT"), ("CN", "1"), None),
        (("region", "dt"), ("CN", "1"), None),  # the table spells it `DT`: so does its path
    ],
)
def test_a_staged_partitions_directory_is_known_when_its_path_needs_no_escaping(
    columns, values, directory
):
    table = ["id", "region", "DT" if directory is None and "region" in columns else "dt", "Region"]
    location = "file:/w/t/_chain_v/R/"
    assert default_partition_directory(location, columns, values, table) == directory


def test_a_stage_whose_query_spells_a_partition_column_otherwise_asks_its_directories():
    """The stage is created from the model's query, whose `DT` names the directories `DT=...`:
    the publish asks where each partition is."""
    (conns, adapter, rel), _ = daily_runs(4, runs=1)
    conns.statements.clear()
    conns.answers.clear()
    regions = [f"g{i:02d}" for i in range(4)]
    conns.answer("count_if(", [(r, "20250106", 3, 3, 0, 0, 0, False, 7, 0) for r in regions])
    conns.query_columns = [("DT" if c == "dt" else c, t) for c, t in COLUMNS]
    conns.query_partitions = [f"region={r}/dt=20250106" for r in regions]
    run = adapter.chain_prepare(rel, "t", {**CONFIG, "chain_partition": {"dt": "20250106"}}, 0, 0)
    assert adapter.chain_execute(run, "SELECT * FROM s.src").message == "OK: 4 delta partition(s)"
    asked = [s for s in conns.statements if s.startswith("DESCRIBE FORMATTED s.t__chain_stage_")]
    assert len(asked) == 4


if __name__ == "__main__":
    import itertools
    import unittest.mock

    ids = itertools.count(1)
    with (
        unittest.mock.patch.object(versions, "new_run_id", lambda now=None: f"RUN{next(ids):04d}"),
        unittest.mock.patch.object(
            safety.Owner, "me", classmethod(lambda cls: cls("host", 42, "inv"))
        ),
    ):
        for g in (1, 4, 16):
            _, sent = daily_runs(g)
            for i, statements in enumerate(sent, 1):
                print(f"{g} group(s), daily run {i}: {len(statements)} statements")
                for kind, n in statement_kinds(statements).items():
                    print(f"  {n:4d}  {kind}")
