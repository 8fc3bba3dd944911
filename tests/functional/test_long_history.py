"""A long history (reads of every day; planning that does not grow with it).

The view gives each delta-only chain value after the newest snapshot (at most the newest few)
a branch of its own; older ones are read through one branch joined to a mapping table, so the
view's text stays bounded (the embedded Derby metastore keeps at most 32,700 characters of a
view). Here the model keeps one
recent branch (`chaintable.view-recent-branches`), so most days go through the mapping, and
every partition must read exactly what `chain_read` (which always renders the literal plan)
and an in-memory replay of the changes give.
"""

import re

from helpers import chain_reads

MODEL = """
{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          sequence_field='seq', rowkind_field='op', chain_partition={'dt': var('dt')},
          tblproperties={'chaintable.view-recent-branches': '1'}) }}
select id, v, op, seq, region, dt from {{ target.schema }}.changes where dt = '{{ var("dt") }}'
"""
DAYS = [f"202501{d:02d}" for d in range(1, 10)]
ROWS = [
    (1, "a", "+I", 1, "CN", "20250101"),
    (2, "b", "+I", 1, "CN", "20250101"),
    (7, "u", "+I", 1, "US", "20250101"),
    (1, "a2", "+U", 5, "CN", "20250102"),
    (2, "b", "-D", 6, "CN", "20250103"),
    (8, "u8", "+I", 6, "US", "20250103"),
    (1, "late", "+U", 4, "CN", "20250104"),  # loses to day 2's seq 5
    (3, "c", "+I", 9, "CN", "20250105"),
    (7, "u", "-D", 10, "US", "20250106"),
    (3, "c7", "+U", 11, "CN", "20250107"),
    (9, "e", "+I", 12, "EU", "20250108"),  # a group that starts late, with no snapshot
    (1, "a9", "+U", 13, "CN", "20250109"),
]


def replay(day):
    """Full state of `day` per region from the raw changes (highest seq wins; -D removes)."""
    best = {}
    for id_, v, op, seq, region, dt in ROWS:
        if dt <= day and ((region, id_) not in best or seq > best[(region, id_)][1]):
            best[(region, id_)] = (v, seq, op)
    return {(r, i, v) for (r, i), (v, _, op) in best.items() if op not in ("-D", "-U")}


def test_long_history_reads_through_the_mapping_table(project):
    p = project
    p.table("changes", "id int, v string, op string, seq int, region string, dt string", ROWS)
    p.model("t", MODEL)
    for d in DAYS:
        p.dbt("run", "--select", "t", vars={"dt": d})
        if d == "20250105":  # a compaction in the middle: days 2-4 anchor on 0101, 6-9 on 0105
            p.run_op("compact_chain", {"model": "t", "partition": {"dt": d}})
    view = p.spark.sql(f"SHOW CREATE TABLE {p.schema}.t").collect()[0][0]
    assert "__chain_map" in view and view.count("UNION ALL") < 12
    assert "WITH SCHEMA EVOLUTION" in view  # no cast projection to plan (view.py, VIEW_CLAUSES)
    # the version the view reads, and at most the one the view before it read (kept for a
    # reader in another session that resolved that view just before it was altered)
    versions = p.partitions("t__chain_map")
    current = [v for v in versions if v.split("=", 1)[1] in view]
    assert len(current) == 1 and 1 <= len(versions) <= 2
    record = dict(p.spark.sql(f"SHOW TBLPROPERTIES {p.schema}.t__snapshot").collect())
    assert record["chaintable.view-map"].split()[0] == current[0].split("=", 1)[1]
    # rerunning the newest day changes no mapped read: the mapping is reused, not rewritten
    p.dbt("run", "--select", "t", vars={"dt": DAYS[-1]})
    assert p.partitions("t__chain_map") == versions
    again = dict(p.spark.sql(f"SHOW TBLPROPERTIES {p.schema}.t__snapshot").collect())
    assert again["chaintable.view-map"] == record["chaintable.view-map"]
    # a mapping table dropped by hand is written again, not trusted from the record
    p.spark.sql(f"DROP TABLE {p.schema}.t__chain_map")
    p.dbt("run", "--select", "t", vars={"dt": DAYS[-1]})
    rebuilt = p.partitions("t__chain_map")
    assert len(rebuilt) == 1 and rebuilt != versions
    # every day through chain_read too (one compiled query, helpers.chain_reads)
    literal = chain_reads(p, "t", DAYS, "region, id, v")
    for d in DAYS:
        got = set(p.rows(f"select region, id, v from {{s}}.t where dt = '{d}'"))
        assert got == replay(d), d
        assert set(literal[d]) == got, d
        assert set(p.rows(f"select distinct dt from {{s}}.t where dt = '{d}'")) <= {(d,)}
    # the whole view: every partition of both branches once, at its full state
    everything = p.rows("select region, dt, id, v from {s}.t")
    assert len(everything) == len(set(everything)) == sum(len(replay(d)) for d in DAYS)
    # an old day read through the mapping scans only its own sources (dynamic pruning)
    plan = "\n".join(
        r[0]
        for r in p.spark.sql(
            f"EXPLAIN FORMATTED select * from {p.schema}.t where region = 'CN' and dt = '20250103'"
        ).collect()
    )
    assert re.search(r"dynamicpruning", plan, re.I), plan[:3000]
    # compacting an old (mapped) day gives the same rows, now read from the snapshot branch
    before = set(p.rows("select region, id, v from {s}.t where dt = '20250103'"))
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250103"}})
    assert set(p.rows("select region, id, v from {s}.t where dt = '20250103'")) == before
    assert "region=CN/dt=20250103" in p.partitions("t__snapshot")
    # a stored day between mapped days reads the snapshot alone: the mapped branches and the
    # anti join against the mapping fold away at planning time (ChainState.mapped_runs)
    stored = "\n".join(
        r[0]
        for r in p.spark.sql(
            f"EXPLAIN select * from {p.schema}.t where region = 'CN' and dt = '20250103'"
        ).collect()
    )
    assert "t__snapshot" in stored and "chain_map" not in stored, stored[:3000]
    assert "Join" not in stored and "Union" not in stored, stored[:3000]
    # the compaction wrote new mapping versions into the existing table (the days it feeds
    # are read by merge while their cumulative partitions are rebuilt, then from them again)
    # and kept only the one the previous view read beside the view's own
    remapped = p.partitions("t__chain_map")
    view = p.spark.sql(f"SHOW CREATE TABLE {p.schema}.t").collect()[0][0]
    current = [v for v in remapped if v.split("=", 1)[1] in view]
    assert len(current) == 1 and current[0] not in rebuilt and len(remapped) == 2
    for d in DAYS:
        assert set(p.rows(f"select region, id, v from {{s}}.t where dt = '{d}'")) == replay(d), d
