"""State that Spark redacts when it is read back (docs/design.md#stored-state), through real dbt.

Spark's SHOW TBLPROPERTIES hides the value of any property whose key or value matches
`(?i)url` or `(?i)secret|password|token|access[.]?key`. Two chains, one deduplicating and one aggregating,
live in a schema named `..._hourly` (ho-url-y) under a location_root holding `secret`, `token`
and `url`, with a primary key column `url`, a sequence field `secret_seq`, an aggregated column
`token_n` and a group `us_token_url`: their locations, options, stale snapshots, history and
lock all come back redacted. The two engines carry every one of those names between them (the
other engines' options add none). Two twins of theirs with plain names take the same operations:
daily runs with the cumulative delta and an inline compaction policy, a backfill that leaves a
snapshot stale, chain_status, compactions (by model and by relation, with overwrite) and
expiration. After each step every day of every group reads the same through both."""

from __future__ import annotations

from dbt.adapters.chaintable.base.properties import REDACTED

MODEL = """
{{{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['{key}', 'region', 'dt'],
          chain_partition={{'dt': var('dt')}}, chain_compaction={{'max_chain_length': 2}},
          partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
          partition_expiration_time='3650 d', {engine}{place}) }}}}
select id as {key}, v, n as {n}, seq as {seq}, op,
       case when region = 'US' then '{us}' else region end as region, dt
from {{{{ target.schema }}}}.changes where dt = '{{{{ var("dt") }}}}'
"""
ENGINES = {
    "dedup": "sequence_field='{seq}', rowkind_field='op'",
    # no rowkind: a -D row is a row like the others, summed
    "agg": "merge_engine='aggregation', sequence_field='{seq}', "
    "aggregate_functions={{'{n}': 'sum'}}",
}
PLAIN = {"key": "id", "n": "n", "seq": "seq", "us": "US"}
RISKY = {"key": "url", "n": "token_n", "seq": "secret_seq", "us": "us_token_url"}
# several operations over several chains in one dbt invocation: each phase is {models, steps},
# each step {op, partition, overwrite, now}, run in order
STEPS = """
{% macro steps(phases) %}
  {% for phase in phases %}{% for s in phase.steps %}{% for m in phase.models %}
    {% set rel = m if '.' in m else none %}{% set name = none if '.' in m else m %}
    {% if s.op == 'compact' %}
      {% do compact_chain(model=name, relation=rel, partition=s.partition, overwrite=s.overwrite) %}
    {% elif s.op == 'expire' %}{% do expire_chain(model=name, relation=rel, now=s.now) %}
    {% else %}{% do chain_status(model=name, relation=rel) %}{% endif %}
  {% endfor %}{% endfor %}{% endfor %}
{% endmacro %}
"""
DAYS = ["20250801", "20250802", "20250803", "20250804"]
ROWS = {
    # the full table, then changes: updates, deletes, late rows (a lower sequence than the
    # anchor's), a key new to one group
    DAYS[0]: [(i, f"v{i}", i, 10, "+I", r) for i in range(1, 7) for r in ("CN", "US")],
    DAYS[1]: [
        (1, "a2", 5, 20, "+U", "CN"),
        (2, "b2", 1, 21, "-D", "CN"),
        (3, "c2", 2, 5, "+U", "US"),
    ],
    DAYS[2]: [
        (1, "a3", 1, 30, "+U", "US"),
        (7, "g3", 7, 31, "+I", "CN"),
        (4, "d3", 3, 9, "+U", "CN"),
    ],
    DAYS[3]: [
        (5, "e4", 2, 40, "+U", "CN"),
        (6, "f4", 1, 41, "-D", "US"),
        (1, "a4", 4, 42, "+U", "CN"),
    ],
}
# added to DAYS[1] once DAYS[2] is compacted: rewriting DAYS[1] leaves that snapshot stale
REWRITE = [(4, "d2", 6, 22, "+U", "US")]


def insert(p, rows) -> None:
    values = [f"({i}, '{v}', {n}, {s}, '{o}', '{r}', '{d}')" for i, v, n, s, o, r, d in rows]
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES {', '.join(values)}")


def models(names: dict[str, str]) -> list[str]:
    prefix = "url_" if names is RISKY else "ref_"
    return [prefix + e for e in ENGINES]


def partitions(p, schema: str, table: str, names: dict[str, str]) -> list[str]:
    paths = [r[0] for r in p.spark.sql(f"SHOW PARTITIONS {schema}.{table}").collect()]
    return sorted(path.replace(f"region={names['us']}/", "region=US/") for path in paths)


def reads(p, chains: list[tuple[str, str, dict[str, str]]]) -> dict[str, dict]:
    """{model: {(region, day): rows}} of every day of both branches of each (model, schema,
    names), through the views (one query, an arm per chain), with the partitions of both
    branches under "branches"."""
    union = " union all ".join(
        f"select {i} as chain, {names['key']} as k, v, {names['n']} as n, "
        f"case when region = '{names['us']}' then 'US' else region end as region, dt "
        f"from {schema}.{model}"
        for i, (model, schema, names) in enumerate(chains)
    )
    out: dict[str, dict] = {model: {} for model, _, _ in chains}
    for row in p.spark.sql(union).collect():
        out[chains[row[0]][0]].setdefault((row[4], row[5]), []).append(tuple(row[1:4]))
    for model, schema, names in chains:
        got = {k: sorted(v, key=repr) for k, v in out[model].items()}
        got["branches"] = [
            partitions(p, schema, f"{model}__{b}", names) for b in ("snapshot", "delta")
        ]
        out[model] = got
    return out


def same_reads(p, risky_schema: str) -> dict:
    """The reads of each risky chain, checked equal to its twin's."""
    got = reads(
        p,
        [(f"url_{e}", risky_schema, RISKY) for e in ENGINES]
        + [(f"ref_{e}", p.schema, PLAIN) for e in ENGINES],
    )
    for engine in ENGINES:
        assert got[f"url_{engine}"] == got[f"ref_{engine}"], engine
    return {engine: got[f"url_{engine}"] for engine in ENGINES}


def snapshot_days(got: dict) -> set[str]:
    """The snapshot days of every chain and group (the same in all of them)."""
    days = {e: {(p.split("/")[0], p.split("=")[-1]) for p in got[e]["branches"][0]} for e in got}
    assert all(d == days["dedup"] for d in days.values()), days
    regions = {r for r, _ in days["dedup"]}
    assert regions == {"region=CN", "region=US"}
    by_region = [{d for r2, d in days["dedup"] if r2 == r} for r in sorted(regions)]
    assert by_region[0] == by_region[1]
    return by_region[0]


def test_chains_whose_state_spark_redacts_behave_as_their_plain_twins(project, tmp_path):
    p = project
    risky_schema = f"{p.schema}_hourly"
    root = tmp_path / "lake" / "secret" / "token" / "url"
    p.spark.sql(
        f"CREATE TABLE {p.schema}.changes (id int, v string, n int, seq int, op string, "
        "region string, dt string) USING parquet"
    )
    insert(p, [(*row, day) for day in DAYS for row in ROWS[day]])
    for engine, config in ENGINES.items():
        for names, place in ((PLAIN, ""), (RISKY, f", schema='hourly', location_root='{root}'")):
            body = MODEL.format(engine=config.format(**names), place=place, **names)
            p.model(models(names)[list(ENGINES).index(engine)], body)
    p.file("macros/steps.sql", STEPS)
    both = models(PLAIN) + models(RISKY)
    try:
        for day in DAYS[:3]:
            p.dbt("run", "--threads", "4", vars={"dt": day})
            got = same_reads(p, risky_schema)
        # the policy compacted DAYS[2] (two deltas since DAYS[0]) in every chain and group
        assert snapshot_days(got) == {DAYS[0], DAYS[2]}
        # Spark hides the risky chains' state; the adapter read it through the mirrors
        props = {
            r[0]: r[1]
            for r in p.spark.sql(f"SHOW TBLPROPERTIES {risky_schema}.url_dedup__snapshot").collect()
        }
        for key in ("chaintable.cumulative-location", "primary-key", "sequence.field"):
            assert props[key] == REDACTED, key
        insert(p, [(*row, DAYS[1]) for row in REWRITE])
        p.dbt("run", "--threads", "4", vars={"dt": DAYS[1]})  # DAYS[2]'s snapshot goes stale
        same_reads(p, risky_schema)
        p.run_op("steps", {"phases": [{"models": models(RISKY), "steps": [{"op": "status"}]}]})
        stale = f"  region=us_token_url/dt={DAYS[2]}  (delta region=us_token_url/dt={DAYS[1]} rewritten)"
        assert p.log_text().count(stale) == len(ENGINES)
        p.dbt("run", "--threads", "4", vars={"dt": DAYS[3]})
        same_reads(p, risky_schema)
        # the stale snapshot recompacted, then a new one by relation (Paimon's partition
        # string), in one invocation
        relations = [f"{risky_schema}.{m}" for m in models(RISKY)]
        overwrite = [{"op": "compact", "partition": {"dt": DAYS[2]}, "overwrite": True}]
        by_relation = [{"op": "compact", "partition": f"dt={DAYS[3]}", "overwrite": False}]
        phases = [
            {"models": both, "steps": overwrite},
            {"models": models(PLAIN) + relations, "steps": by_relation},
        ]
        p.run_op("steps", {"phases": phases})
        assert snapshot_days(same_reads(p, risky_schema)) == {DAYS[0], DAYS[2], DAYS[3]}
        expire = [{"op": "expire", "now": "2045-01-01"}]
        p.run_op("steps", {"phases": [{"models": both, "steps": expire}]})
        # every snapshot before the cutoff but the last, with its segment's deltas, expired
        got = same_reads(p, risky_schema)
        assert snapshot_days(got) == {DAYS[3]}
        assert got["dedup"]["branches"][1] == [f"region={r}/dt={DAYS[3]}" for r in ("CN", "US")]
    finally:
        p.spark.sql(f"DROP DATABASE IF EXISTS {risky_schema} CASCADE")
