"""Golden SQL: the statements the adapter sends for a fixed set of operations on a fixed catalog,
compared with the committed text under tests/unit/golden/. A change to what runs shows up as a
diff there; a restructuring that changes nothing leaves them equal.

Regenerate after an intended change: CHAINTABLE_GOLDEN_UPDATE=1 pytest tests/unit/test_golden_sql.py
and read the diff before committing it.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import Any

import pytest

from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.keys import P_BRANCH, P_VIEW_RECENT
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.properties import mirror_key
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.base.versions import in_version
from dbt.adapters.chaintable.publish import safety
from tests.unit.fake_catalog import FakeConnections, fake_adapter

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("CHAINTABLE_GOLDEN_UPDATE") == "1"

CONFIG: dict[str, Any] = {
    "partition_by": ["region", "dt"],
    "chain_partition_keys": ["dt"],
    "primary_key": ["id", "region", "dt"],
    "sequence_field": "seq",
    "rowkind_field": "op",
    "partition_timestamp_pattern": "$dt",
    "partition_timestamp_formatter": "yyyyMMdd",
    "partition_expiration_time": "30 d",
}
COLUMNS = [
    ("id", "int"),
    ("v", "string"),
    ("op", "string"),
    ("seq", "bigint"),
    ("region", "string"),
    ("dt", "string"),
]
DAYS = [f"202501{d:02d}" for d in range(1, 11)]


@pytest.fixture(autouse=True)
def deterministic(monkeypatch):
    counter = itertools.count(1)
    monkeypatch.setattr(versions, "new_run_id", lambda now=None: f"RUN{next(counter):04d}")
    monkeypatch.setattr(safety.Owner, "me", classmethod(lambda cls: cls("host", 42, "inv")))
    monkeypatch.setattr(versions, "writer_id", lambda: "w1")
    monkeypatch.delenv("CHAINTABLE_FAILPOINT", raising=False)


def chain(
    conns: FakeConnections,
    recent: int = 2,
    config: dict[str, Any] = CONFIG,
    columns: list[tuple[str, str]] = COLUMNS,
    branches: dict[str, list[tuple[str, str]]] | None = None,
) -> None:
    """CN: snapshots 0101 and 0108, deltas 0102-0110; US: snapshot 0101, deltas 0102-0104
    (or each branch's (region, dt) partitions in `branches`). At most `recent` literal branches
    in the view, so older days go through the mapping."""
    props = {**ChainOptions.from_config("t", config).to_properties(), P_VIEW_RECENT: str(recent)}
    for branch, parts in (
        branches
        or {
            "snapshot": [("CN", "20250101"), ("CN", "20250108"), ("US", "20250101")],
            "delta": [("CN", d) for d in DAYS[1:]] + [("US", d) for d in DAYS[1:4]],
        }
    ).items():
        conns.table(
            f"t__{branch}",
            columns=list(columns),
            partition_by=("region", "dt"),
            props={**props, P_BRANCH: branch},
            partitions=[f"region={r}/dt={d}" for r, d in parts],
        )


def normalized(statements: list[str]) -> str:
    text = "\n;\n".join(statements) + "\n"
    # the lock's start and the run's expiration check carry the wall clock, the lock's writer
    # token is random
    return re.sub(
        r"'(chaintable\.lock\.since|chaintable\.lock\.heartbeat|chaintable\.last-expire-check"
        r"|chaintable\.lock\.writer)' = '[^']*'",
        r"'\1' = '<now>'",
        text,
    )


def check(name: str, statements: list[str]) -> None:
    path = GOLDEN / f"{name}.sql"
    got = normalized(statements)
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(got)
    assert path.exists(), f"{path} is missing: run with CHAINTABLE_GOLDEN_UPDATE=1 to write it"
    assert got == path.read_text(), f"SQL of {name} differs from {path}"


def setup(recent: int = 2, **chain_args: Any):
    conns = FakeConnections()
    chain(conns, recent, **chain_args)
    adapter = fake_adapter(conns)
    rel = adapter.Relation.create(schema="s", identifier="t", type="view")
    return conns, adapter, rel


def test_chain_read_of_a_snapshot_day_a_merged_day_and_a_delta_only_group():
    _conns, adapter, rel = setup()
    reads = [
        adapter.chain_read_sql(rel, spec)
        for spec in (
            {"dt": "20250108"},
            {"dt": "20250110"},
            "dt=20250104",
            {"region": "US", "dt": "20250103"},
        )
    ]
    check("chain_read", reads)


def test_chain_read_with_sequence_groups_and_a_function_in_a_group():
    config = {
        **CONFIG,
        "merge_engine": "partial-update",
        "sequence_groups": {"g_1": ["v"], "g_2,g_3": ["n"]},
        "aggregate_functions": {"n": "sum"},
    }
    columns = [*COLUMNS[:2], ("g_1", "int"), ("n", "int"), ("g_2", "int"), ("g_3", "int")]
    _conns, adapter, rel = setup(config=config, columns=columns + COLUMNS[2:])
    check("chain_read_sequence_groups", [adapter.chain_read_sql(rel, {"dt": "20250110"})])


def test_drop_of_a_delta_partition_refreshes_the_view_with_literal_and_mapped_branches():
    conns, adapter, rel = setup()
    assert (
        adapter.chain_drop_partition(rel, {"region": "CN", "dt": "20250102"}, "delta")
        == "s.t: dropped delta partition region=CN/dt=20250102"
    )
    check("drop_delta", conns.statements)


def test_compaction_publishes_each_group_and_refreshes_the_view():
    conns, adapter, rel = setup(recent=7)
    assert adapter.chain_compact(rel, {"dt": "20250104"}) is True
    check("compact", conns.statements)


def test_compaction_with_overwrite_switches_an_existing_snapshot_partition():
    conns, adapter, rel = setup(recent=7)
    assert adapter.chain_compact(rel, "dt=20250108", overwrite=True) is True
    check("compact_overwrite", conns.statements)


def test_compaction_into_a_bucketed_snapshot_keeps_the_buckets_layout():
    """The compacted rows are shuffled and sorted by key (compact.sql) unless the snapshot
    table has buckets: its bucket files are then its layout, which a shuffle would not keep."""
    conns, adapter, rel = setup(recent=7)
    snapshot = conns.tables["s.t__snapshot"]
    snapshot.buckets, snapshot.bucket_columns = 4, ("id",)
    assert adapter.chain_compact(rel, {"dt": "20250104"}) is True
    create = next(s for s in conns.statements if s.startswith("CREATE TABLE s.t__chain_pub"))
    assert "CLUSTERED BY (`id`) INTO 4 BUCKETS" in create
    insert = next(
        s for s in conns.statements if s.startswith("INSERT OVERWRITE TABLE s.t__chain_pub")
    )
    assert "DISTRIBUTE BY" not in insert and "SORT BY" not in insert
    assert insert.startswith("INSERT OVERWRITE TABLE s.t__chain_pub_w1 PARTITION (`region`, `dt`)")


def test_expiration_drops_deltas_then_snapshots():
    conns, adapter, rel = setup()
    lines = adapter.chain_expire(rel, now="2025-03-01 00:00:00")
    assert lines[0] == (
        "expire_chain s.t (cutoff 2025-01-30 00:00:00): dropping 1 snapshot and "
        "6 delta partition(s)"
    )
    check("expire", conns.statements)


def test_status():
    _conns, adapter, rel = setup()
    check("status", [adapter.chain_status(rel, "2025-03-01 00:00:00")])


def model_run(
    conns: FakeConnections,
    adapter: Any,
    rel: Any,
    config: dict[str, Any],
    exists: bool,
    columns: list[tuple[str, str]] = COLUMNS,
) -> str:
    conns.query_columns = list(columns)
    conns.query_partitions = [
        f"region={r[0]}/dt={r[1]}" for _, rows in conns.answers for r in rows if len(r) > 1
    ]
    adapter.cached_relation = lambda database, schema, identifier: rel if exists else None
    run = adapter.chain_prepare(rel, "t", config, False, False)
    return adapter.chain_execute(run, "SELECT * FROM s.src").message


def test_delta_run_stages_checks_publishes_and_fills_the_day_of_a_group_without_rows():
    conns, adapter, rel = setup()
    conns.answer("count_if(", [("CN", "20250111", 3, 3, 0, 0, 0, False, 7, 0)])
    msg = model_run(conns, adapter, rel, {**CONFIG, "chain_partition": {"dt": "20250111"}}, True)
    assert msg == "OK: 2 delta partition(s)"
    check("delta_run", conns.statements)


def test_delta_run_rewriting_a_day_switches_it_and_marks_later_snapshots_stale():
    conns, adapter, rel = setup()
    conns.answer("count_if(", [("CN", "20250105", 4, 2, 0, 0, 0, False, 7, 0)])
    assert model_run(conns, adapter, rel, dict(CONFIG), True) == "OK: 1 delta partition(s)"
    check("delta_rewrite", conns.statements)


def test_delta_run_rewriting_a_compacted_day_names_the_snapshot_it_invalidates_on_the_lock():
    """CN 0108 is a snapshot: the lock names it before the publish (for recovery), the view
    stops reading it, it is dropped, and the lock forgets it."""
    conns, adapter, rel = setup()
    conns.answer("count_if(", [("CN", "20250108", 2, 2, 0, 0, 0, False, 7, 0)])
    assert model_run(conns, adapter, rel, dict(CONFIG), True) == "OK: 1 delta partition(s)"
    text = normalized(conns.statements)
    named = text.index("SET TBLPROPERTIES ('chaintable.stage.invalidates' = ")
    published = text.index("ALTER TABLE s.t__delta PARTITION")
    dropped = text.index("ALTER TABLE s.t__snapshot DROP IF EXISTS PARTITION (`region` = 'CN'")
    key = "chaintable.stage.invalidates"  # and its mirror, should a value have needed one
    forgot = text.index(f"UNSET TBLPROPERTIES IF EXISTS ('{mirror_key(key)}', '{key}')")
    assert named < published < dropped < forgot
    check("delta_rewrite_invalidates", conns.statements)


def test_first_run_creates_both_branches_under_location_root():
    conns = FakeConnections()
    adapter = fake_adapter(conns)
    rel = adapter.Relation.create(schema="s", identifier="t", type="view")
    conns.answer("count_if(", [("CN", "20250101", 3, 3, 0, 0, 0, False, 7, 0)])
    config = {
        **CONFIG,
        "location_root": "/data/my 'lake'/",
        "buckets": 4,
        "clustered_by": "id",
        "tblproperties": {"owner": "o'neil"},
    }
    assert model_run(conns, adapter, rel, config, False) == "OK: 1 snapshot partition(s)"
    check("first_run", conns.statements)


def test_delta_run_of_one_partition_stages_it_without_partitions_and_publishes_its_directory():
    conns, adapter, rel = setup()
    conns.answer("count_if(", [("US", "20250105", 2, 2, 0, 0, 0, False, 7, 0)])
    spec = {"region": "US", "dt": "20250105"}
    msg = model_run(conns, adapter, rel, {**CONFIG, "chain_partition": spec}, True)
    assert msg == "OK: 1 delta partition(s)"
    check("delta_run_one_partition", conns.statements)
    stage = "file:/warehouse/s.db/t__delta/_chain_v/RUN0001"
    # no staging table: the rows go to a bare directory, which the lock names
    assert not [s for s in conns.statements if "t__chain_stage" in s]
    lock = next(s for s in conns.statements if s.startswith("CREATE VIEW s.t__chain_lock"))
    assert '\'chaintable.stage.partition\' = \'{"region": "US", "dt": "20250105"}\'' in lock
    assert "'chaintable.stage.run' = 'RUN0001'" in lock
    assert "'chaintable.stage.target' = 's.t__delta'" in lock
    assert f"INSERT OVERWRITE DIRECTORY '{stage}' USING parquet\nSELECT * FROM s.src" in (
        conns.statements
    )
    assert f"FROM (SELECT * FROM parquet.`{stage}`) __s GROUP BY" in next(
        s for s in conns.statements if "count_if(" in s
    )
    assert (
        "ALTER TABLE s.t__delta ADD PARTITION (`region` = 'US', `dt` = '20250105') "
        f"LOCATION '{stage}'"
    ) in conns.statements


def test_a_daily_run_checks_its_rows_in_the_cumulative_build_before_it_publishes():
    """The steady state: the day after a run that built the cumulative delta. No query of its
    own checks the staged rows: the build of the day's cumulative partition reads them through
    the rules (each fails the query) and fails on tied rows, before the delta partition is
    published; the partition it wrote is only added after the publish."""
    conns, adapter, rel = setup()
    conns.answer("count_if(", [("US", "20250105", 2, 2, 0, 0, 0, False, 7, 0)])
    config = {**CONFIG, "chain_partition": {"region": "US", "dt": "20250105"}}
    assert model_run(conns, adapter, rel, config, True) == "OK: 1 delta partition(s)"
    conns.statements.clear()
    conns.answers.clear()
    conns.answer("max(CAST(", [("US", "20250101", 5)])  # the anchor's highest sequence
    config = {**CONFIG, "chain_partition": {"region": "US", "dt": "20250106"}}
    assert model_run(conns, adapter, rel, config, True) == "OK: 1 delta partition(s)"
    check("delta_run_checked_build", conns.statements)
    assert not [s for s in conns.statements if "count_if(" in s]  # no check query
    stage = "file:/warehouse/s.db/t__delta/_chain_v/RUN0004"
    build = next(s for s in conns.statements if "t__cumulative/_chain_v/" in s)
    publish = (
        "ALTER TABLE s.t__delta ADD PARTITION (`region` = 'US', `dt` = '20250106') "
        f"LOCATION '{stage}'"
    )
    assert conns.statements.index(build) < conns.statements.index(publish)
    # the staged rows, through the rules; the deltas published before, from the branch
    assert (
        "SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM (SELECT * FROM parquet.`"
        f"{stage}`) __g WHERE CASE WHEN `id` IS NULL OR `region` IS NULL OR `dt` IS NULL THEN "
        "raise_error('chaintable: a staged row breaks a check') WHEN NOT coalesce(`op` IN "
        "('+I', '-U', '+U', '-D'), false) THEN raise_error('chaintable: a staged row breaks a "
        "check') WHEN coalesce(NOT ((`region` = 'US' AND `dt` = '20250106')), false) THEN "
        "raise_error('chaintable: a staged row breaks a check') WHEN `seq` IS NULL OR "
        "CAST(`seq` AS BIGINT) <= 5 THEN raise_error('chaintable: a staged row breaks a "
        "check') ELSE true END"
    ) in build
    assert "t__snapshot" not in build  # every row must sort after the anchor's: not read
    assert "raise_error('chaintable: tied rows in the partition written')" in build
    assert "lag(`seq`) OVER (" in build


def test_a_daily_run_of_a_chain_without_a_mask_key_checks_its_stage():
    """A string key has no mask blocks, so the build has no window to find ties in: the stage's
    own checks run, and the build comes after the publish."""
    columns = [("id", "string") if c == "id" else (c, t) for c, t in COLUMNS]
    conns, adapter, rel = setup(columns=columns)
    for d in ("20250105", "20250106"):
        conns.statements.clear()
        conns.answers.clear()
        conns.answer("count_if(", [("US", d, 2, 2, 0, 0, 0, False, 7, 0)])
        config = {**CONFIG, "chain_partition": {"region": "US", "dt": d}}
        assert model_run(conns, adapter, rel, config, True, columns) == "OK: 1 delta partition(s)"
        checks = next(i for i, s in enumerate(conns.statements) if "count_if(" in s)
        build = next(i for i, s in enumerate(conns.statements) if "t__cumulative/_chain_v/" in s)
        publish = next(
            i for i, s in enumerate(conns.statements) if s.startswith("ALTER TABLE s.t__delta ADD")
        )
        assert checks < publish < build
        assert "lag(" not in conns.statements[build]


def test_a_bucketed_chain_stages_its_one_partition_in_a_bucketed_table():
    """Bucket files are laid out by a table's write: a bucketed chain's run of one partition
    stages it in a staging table bucketed like the target, in a directory of another run id
    than the one the lock names (which stays unwritten)."""
    conns, adapter, rel = setup()
    conns.answer("count_if(", [("US", "20250105", 2, 2, 0, 0, 0, False, 7, 0)])
    spec = {"region": "US", "dt": "20250105"}
    config = {**CONFIG, "chain_partition": spec, "clustered_by": "id", "buckets": 4}
    assert model_run(conns, adapter, rel, config, True) == "OK: 1 delta partition(s)"
    stage_writes = "INSERT OVERWRITE DIRECTORY 'file:/warehouse/s.db/t__delta"
    assert not [s for s in conns.statements if s.startswith(stage_writes)]
    create = next(s for s in conns.statements if s.startswith("CREATE TABLE s.t__chain_stage"))
    assert "CLUSTERED BY (`id`) INTO 4 BUCKETS" in create
    assert "LOCATION 'file:/warehouse/s.db/t__delta/_chain_v/RUN0002'" in create
    lock = next(s for s in conns.statements if s.startswith("CREATE VIEW s.t__chain_lock"))
    assert "'chaintable.stage.run' = 'RUN0001'" in lock
    assert "DROP TABLE IF EXISTS s.t__chain_stage_w1" in conns.statements


INT_DT = [(c, "int" if c == "dt" else t) for c, t in COLUMNS]


@pytest.mark.parametrize(
    ("held", "shown"), [(("20250105",), "'20250105'"), ((None,), "no value")], ids=["cast", "null"]
)
def test_an_empty_day_refuses_a_chain_partition_value_spark_holds_otherwise(held, shown):
    """A day without rows is named from chain_partition alone: on an int column '0020250105'
    would become partition 20250105, not the one the run and its recovery look for by name.
    The run asks Spark how it spells the typed value and refuses before anything is written."""
    conns, adapter, rel = setup(columns=INT_DT)
    conns.answer("count_if(", [])
    conns.answer("SELECT CAST(CAST('0020250105' AS int) AS STRING)", [held])
    spec = {"region": "US", "dt": "0020250105"}
    with pytest.raises(ChainConfigError) as e:
        model_run(conns, adapter, rel, {**CONFIG, "chain_partition": spec}, True, INT_DT)
    assert str(e.value).endswith(
        f"chain_incremental model 't': chain_partition {spec} gives column 'dt' (int) the value "
        f"'0020250105', which Spark holds as {shown}; give chain_partition the value as SHOW "
        "PARTITIONS prints it; nothing was written"
    )
    assert not [s for s in conns.statements if s.startswith("ALTER TABLE s.t__delta")]


def test_an_empty_day_takes_a_chain_partition_value_spark_spells_alike():
    """The model may spell the column otherwise (DT): its type is still found."""
    conns, adapter, rel = setup(columns=INT_DT)
    conns.answer("count_if(", [])
    conns.answer("SELECT CAST(CAST('20250111' AS int) AS STRING)", [("20250111",)])
    spec = {"region": "US", "dt": "20250111"}
    columns = [("DT" if c == "dt" else c, t) for c, t in INT_DT]
    msg = model_run(conns, adapter, rel, {**CONFIG, "chain_partition": spec}, True, columns)
    assert msg == "OK: 1 delta partition(s)"
    assert "SELECT CAST(CAST('20250111' AS int) AS STRING)" in conns.statements
    assert (
        "ALTER TABLE s.t__delta ADD PARTITION (`region` = 'US', `dt` = '20250111') LOCATION "
        "'file:/warehouse/s.db/t__delta/_chain_v/RUN0001'"
    ) in conns.statements


def test_an_empty_day_of_string_partition_values_asks_spark_nothing_more():
    conns, adapter, rel = setup()
    conns.answer("count_if(", [])
    spec = {"region": "US", "dt": "20250111"}
    model_run(conns, adapter, rel, {**CONFIG, "chain_partition": spec}, True)
    assert not [s for s in conns.statements if s.startswith("SELECT CAST(CAST(")]


@pytest.mark.parametrize(
    "spec",
    [{"region": "US", "dt": "2025-01-05"}, {"dt": "2025-01-05"}],
    ids=["one_partition_stage", "partitioned_stage"],
)
def test_a_run_refuses_rows_whose_partition_spark_spells_otherwise_than_chain_partition(spec):
    """The check's predicate compares typed values (on an int column chain_partition '05'
    lets 5 in), and Spark names the partition as it prints the value (5). Published as the
    spec's partition, a one-partition stage would be the wrong one; on a partitioned stage the
    spec's empty partition, written over the stage, would cast to the staged one and replace its
    rows. So the run is refused before anything is written to the stage or published (here the
    fake catalog's check gives a row whose dt is spelt otherwise)."""
    conns, adapter, rel = setup()
    conns.answer("count_if(", [("US", "20250105", 2, 2, 0, 0, 0, False, 7, 0)])
    with pytest.raises(Exception, match="spells differently") as e:
        model_run(conns, adapter, rel, {**CONFIG, "chain_partition": spec}, True)
    assert "partition region=US/dt=20250105" in str(e.value)
    assert "nothing was written" in str(e.value)
    assert not [s for s in conns.statements if s.startswith("ALTER TABLE s.t__delta")]
    assert not [s for s in conns.statements if "t__chain_stage PARTITION" in s]
    # the lock's recovery deletes the stage's directory (a bare one, which the lock names, or
    # the staging table's) through the scratch table
    stage = "file:/warehouse/s.db/t__delta/_chain_v/RUN0001"
    assert f"ALTER TABLE s.t__chain_gc ADD PARTITION (`d` = 'RUN0002-0') LOCATION '{stage}'" in (
        conns.statements
    )


@pytest.mark.parametrize(
    "location, run_id, inside",
    [
        ("file:/w/t__delta/_chain_v/RUN0001", "RUN0001", True),
        ("file:/w/t__delta/_chain_v/RUN0001/", "RUN0001", True),
        ("file:/w/t__delta/_chain_v/RUN0001/region=CN/dt=20250108", "RUN0001", True),
        ("file:/w/t__delta/_chain_v/RUN00012/region=CN/dt=20250108", "RUN0001", False),
        ("file:/w/t__delta/region=CN/dt=20250108", "RUN0001", False),
    ],
)
def test_a_partition_lies_in_a_runs_directory_or_below_it(location, run_id, inside):
    """How recovery tells that an unfinished run published a delta partition."""
    assert in_version(location, run_id) is inside
