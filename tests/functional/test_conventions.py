"""dbt's own conventions on a chain (README: dbt conventions): grants on the view, persist_docs on
the view and both branches, rows_affected in run_results, the chain's relations in dbt docs'
catalog, and the configs refused before anything is written (on_schema_change, file_format,
grants where Spark has none, contract constraints the chain cannot enforce)."""

import json

MODEL = """
{{{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_partition={{'dt': var('dt')}}{extra}) }}}}
select id, v, region, dt from {{{{ target.schema }}}}.changes where dt = '{{{{ var("dt") }}}}'
"""

SCHEMA = """
version: 2
models:
  - name: t
    description: "Orders, full state per day"
    config:
      persist_docs: {relation: true, columns: true}
      grants: {select: ['alice', 'bob']}
    columns:
      - {name: id, description: "order id"}
      - {name: v, description: "the order's value"}
      - {name: dt, description: "business day"}
  - name: bad_constraint
    config: {contract: {enforced: true}}
    constraints:
      - {type: primary_key, columns: [id, region, dt]}
    columns:
      - {name: id, data_type: int, constraints: [{type: not_null}]}
      - {name: v, data_type: string, constraints: [{type: check, expression: "v <> ''"}]}
      - {name: region, data_type: string}
      - {name: dt, data_type: string}
"""

# Spark's own catalog has no GRANT or SHOW GRANTS (both refused as invalid statements), so dbt's
# statements are stood in for by table properties of the relation, through the dispatch names
# dbt-spark uses; the model `bad_grants` keeps dbt's own statements, which Spark refuses
GRANT_MACROS = """
{% macro chaintable__get_show_grant_sql(relation) %}
  {%- if relation.identifier == 'bad_grants' -%}{{ return(default__get_show_grant_sql(relation)) }}{%- endif -%}
  {%- set held = [] -%}
  {%- if load_relation(relation) is not none -%}
    {%- for r in run_query('show tblproperties ' ~ relation) if r[0].startswith('test.grant.') -%}
      {%- do held.append("('" ~ r[0][11:] ~ "', '" ~ r[1] ~ "')") -%}
    {%- endfor -%}
  {%- endif -%}
  select Principal, ActionType, 'TABLE' as ObjectType
  from values {{ (held or ["('', '')"]) | join(', ') }} as g(Principal, ActionType) where Principal <> ''
{% endmacro %}
{% macro chaintable__get_grant_sql(relation, privilege, grantees) %}
  alter view {{ relation }} set tblproperties ('test.grant.{{ grantees[0] }}' = '{{ privilege | upper }}')
{% endmacro %}
{% macro chaintable__get_revoke_sql(relation, privilege, grantees) %}
  alter view {{ relation }} unset tblproperties ('test.grant.{{ grantees[0] }}')
{% endmacro %}
"""

ROWS = [
    (1, "a", "CN", "20250801"),
    (2, "b", "US", "20250801"),
    (3, "c", "US", "20250801"),
    (2, "b2", "US", "20250802"),
]


def branches(p, name):
    return p.rows(f"show tables in {{s}} like '{name}__*'")


def comments(p, relation):
    """{column: comment} and the relation's Comment, from DESCRIBE EXTENDED."""
    rows = p.spark.sql(f"describe table extended {p.schema}.{relation}").collect()
    cols, table = {}, None
    for r in rows:
        if not r.col_name or r.col_name.startswith("#"):
            break
        cols[r.col_name] = r.comment
    for r in rows:
        if r.col_name == "Comment":
            table = r.data_type
    return cols, table


def grants_of(p, relation):
    props = p.spark.sql(f"show tblproperties {p.schema}.{relation}").collect()
    return sorted(
        (r.key[len("test.grant.") :], r.value) for r in props if r.key.startswith("test.grant.")
    )


def rows_affected(p):
    results = json.loads((p.root / "target" / "run_results.json").read_text())
    return {
        r["unique_id"].split(".")[-1]: (r["status"], r["adapter_response"].get("rows_affected"))
        for r in results["results"]
    }


def test_dbt_conventions(project):
    p = project
    p.artifacts = True  # run_results.json and the docs' artifacts are read
    p.table("changes", "id int, v string, region string, dt string", ROWS)
    p.model("t", MODEL.format(extra=""))
    p.model("t_orc", MODEL.format(extra=", file_format='orc'"))
    p.model("bad_osc", MODEL.format(extra=", on_schema_change='append_new_column'"))
    p.model("bad_format", MODEL.format(extra=", file_format='delta'"))
    p.model("bad_grants", MODEL.format(extra=", grants={'select': ['alice']}"))
    p.model("bad_constraint", MODEL.format(extra=""))
    p.file("models/schema.yml", SCHEMA)
    p.file("macros/grants.sql", GRANT_MACROS)

    p.dbt("run", vars={"dt": "20250801"}, expect_ok=False)
    log = p.log_text()
    assert rows_affected(p) == {
        "t": ("success", 3),
        "t_orc": ("success", 3),
        "bad_osc": ("error", None),
        "bad_format": ("error", None),
        "bad_grants": ("error", None),
        "bad_constraint": ("error", None),
    }
    assert (
        "chain_incremental model 'bad_osc': on_schema_change 'append_new_column' is not one of "
        "['ignore', 'fail', 'append_new_columns']" in log
    )
    assert (
        "chain_incremental model 'bad_format': file_format 'delta' is not one of "
        "['parquet', 'orc']" in log
    )
    assert "chain_incremental model 'bad_grants': grants cannot be applied" in log
    assert "INVALID_STATEMENT_OR_CLAUSE" in log or "PARSE_SYNTAX_ERROR" in log
    assert (
        "chain_incremental model 'bad_constraint': contract constraint 'check' on column 'v' "
        "cannot be enforced" in log
    )
    for bad in ("bad_osc", "bad_format", "bad_grants", "bad_constraint"):
        assert branches(p, bad) == [] and p.rows(f"show views in {{s}} like '{bad}'") == []

    # grants: on the view only, revoked when taken out of the config
    assert grants_of(p, "t") == [("alice", "SELECT"), ("bob", "SELECT")]
    assert grants_of(p, "t__snapshot") == grants_of(p, "t__delta") == []
    # persist_docs: the description on the view and both branches, the columns' on both
    # branches (not the partition column dt: Spark refuses ALTER COLUMN on it)
    for rel in ("t", "t__snapshot", "t__delta"):
        assert comments(p, rel)[1] == "Orders, full state per day"
    for rel in ("t__snapshot", "t__delta"):
        assert comments(p, rel)[0] == {
            "id": "order id",
            "v": "the order's value",
            "region": None,
            "dt": None,
        }
    assert p.rows("select id, v, region from {s}.t_orc") == [
        (1, "a", "CN"),
        (2, "b", "US"),
        (3, "c", "US"),
    ]

    p.file("models/schema.yml", SCHEMA.replace("['alice', 'bob']", "['alice']"))
    p.dbt("run", "--select", "t", "t_orc", vars={"dt": "20250802"})
    # the day's rows: US has one change, CN an empty "no changes" partition
    assert rows_affected(p) == {"t": ("success", 1), "t_orc": ("success", 1)}
    assert grants_of(p, "t") == [("alice", "SELECT")]
    assert comments(p, "t")[1] == "Orders, full state per day"
    view_cols = comments(p, "t")[0]
    assert view_cols == {"id": "order id", "v": "the order's value", "region": None, "dt": None}, (
        view_cols
    )
    assert p.partitions("t_orc__delta") == ["region=CN/dt=20250802", "region=US/dt=20250802"]
    assert p.rows("select id, v, region from {s}.t_orc where dt = '20250802'") == [
        (1, "a", "CN"),
        (2, "b2", "US"),
        (3, "c", "US"),
    ]

    # dbt docs generate: the view's catalog entry names the chain's relations
    p.dbt("docs", "generate", "--select", "t", vars={"dt": "20250802"})
    catalog = json.loads((p.root / "target" / "catalog.json").read_text())
    entry = catalog["nodes"]["model.chain_test.t"]
    assert entry["metadata"]["type"] == "view"
    stats = {k: v["value"] for k, v in entry["stats"].items() if k != "has_stats"}
    assert stats == {
        "chain_snapshot": f"{p.schema}.t__snapshot",
        "chain_delta": f"{p.schema}.t__delta",
        "chain_cumulative": f"{p.schema}.t__cumulative",
    }
    assert not any(k.endswith(("__snapshot", "__delta")) for k in catalog["nodes"])
