"""dbt's own model configs as a chain takes them (base/conventions.py) and the chain's relations
in the docs catalog (view/docs.py): pure, without Spark."""

import re

import pytest

from dbt.adapters.chaintable.base import conventions as C
from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.view.docs import (
    catalog_with_chain_relations,
    column_docs,
    with_chain_relations,
)

BASE = {"partition_by": ["dt"], "primary_key": ["id", "dt"]}


def settings(**config):
    return ModelSettings.from_config("m", {**BASE, **config})


def test_on_schema_change_is_one_of_the_three_and_a_typo_names_them():
    assert settings().on_schema_change == "ignore"
    assert settings(on_schema_change="Append_New_Columns").on_schema_change == "append_new_columns"
    with pytest.raises(
        ChainConfigError,
        match=r"chain_incremental model 'm': on_schema_change 'appendnew' is not one of "
        r"\['ignore', 'fail', 'append_new_columns'\]",
    ):
        settings(on_schema_change="appendnew")
    with pytest.raises(ChainConfigError, match="would drop columns that stored partitions hold"):
        settings(on_schema_change="sync_all_columns")


@pytest.mark.parametrize("fmt", ["delta", "iceberg", "hudi", "csv", "text", "parquet2"])
def test_a_file_format_other_than_the_tested_ones_is_refused(fmt):
    with pytest.raises(
        ChainConfigError,
        match=rf"chain_incremental model 'm': file_format '{fmt}' is not one of "
        r"\['parquet', 'orc'\]: ",
    ):
        settings(file_format=fmt)


def test_the_tested_file_formats():
    assert (settings().file_format, settings(file_format="ORC").file_format) == ("parquet", "orc")


def test_grants_and_persist_docs_take_dbts_shapes():
    s = settings(grants={"select": "alice", "modify": ["bob", "carol"]})
    assert dict(s.grants) == {"select": ("alice",), "modify": ("bob", "carol")}
    assert settings(persist_docs={"relation": True}).persist_docs == (True, False)
    assert settings().grants == {} and settings().persist_docs == (False, False)
    with pytest.raises(ChainConfigError, match=r"model 'm': grants must be a dict"):
        settings(grants=["alice"])
    with pytest.raises(ChainConfigError, match=r"model 'm': grants\['select'\] must be a grantee"):
        settings(grants={"select": [1]})
    with pytest.raises(ChainConfigError, match=r"model 'm': persist_docs must be a dict"):
        settings(persist_docs=True)
    with pytest.raises(ChainConfigError, match=r"persist_docs keys \['column'\] are not"):
        settings(persist_docs={"column": True})


def node(constraints=(), columns=None, enforced=True):
    return {
        "contract": {"enforced": enforced},
        "constraints": list(constraints),
        "columns": columns or {},
    }


def test_constraints_the_chain_enforces_are_accepted():
    pk = ["id", "dt"]
    C.check_constraints("m", pk, None)
    C.check_constraints(
        "m",
        pk,
        node(
            [{"type": "primary_key", "columns": ["DT", "id"]}],
            {"id": {"constraints": [{"type": "not_null"}, {"type": "primary_key"}][:1]}},
        ),
    )
    # not enforced: dbt itself applies no constraint
    C.check_constraints("m", pk, node([{"type": "check", "expression": "x"}], enforced=False))
    # kept as documentation by the user's choice
    C.check_constraints(
        "m",
        pk,
        node(columns={"v": {"constraints": [{"type": "unique", "warn_unenforced": False}]}}),
    )


@pytest.mark.parametrize(
    "constraints, columns, what",
    [
        ([], {"v": {"constraints": [{"type": "not_null"}]}}, "'not_null' on column 'v'"),
        ([{"type": "primary_key", "columns": ["id"]}], {}, r"'primary_key' on columns \['id'\]"),
        ([], {"id": {"constraints": [{"type": "unique"}]}}, "'unique' on column 'id'"),
        ([{"type": "check", "expression": "v > 0"}], {}, r"'check' on columns \[\]"),
    ],
)
def test_other_constraints_are_refused_naming_the_model_and_what_is_enforced(
    constraints, columns, what
):
    with pytest.raises(ChainConfigError) as e:
        C.check_constraints("m", ["id", "dt"], node(constraints, columns))
    assert re.search(
        f"chain_incremental model 'm': contract constraint {what} cannot", str(e.value)
    )
    assert "not_null on primary_key columns" in str(e.value) and "nothing was written" in str(
        e.value
    )


def test_a_server_without_grant_statements_is_told_by_its_error():
    spark4 = "[PARSE_SYNTAX_ERROR] Syntax error at or near 'on': missing 'FUNCTIONS'."
    assert C.grants_unsupported("Runtime Error\n  " + spark4)
    assert C.first_line("Runtime Error\n  " + spark4 + "\n== SQL ==") == spark4
    assert C.grants_unsupported("Operation not allowed: GRANT(line 1, pos 0)")
    assert not C.grants_unsupported("[TABLE_OR_VIEW_NOT_FOUND] The table or view `s`.`t`")


def test_column_docs_of_a_node():
    n = {"columns": {"id": {"description": "key"}, "v": {}}}
    assert column_docs(n) == {"id": "key", "v": ""} and column_docs(None) == {}


def test_the_catalog_names_a_chain_views_relations_in_its_entry():
    def row(name, kind, col="id"):
        return {"table_schema": "s", "table_name": name, "table_type": kind, "column_name": col}

    rows = [
        row("t", "view"),
        row("t", "view", "dt"),
        row("t__snapshot", "table"),
        row("t__delta", "table"),
        row("t__chain_map", "table"),
        row("plain", "view"),
        row("u", "view"),
        row("u__snapshot", "table"),  # no delta branch: not a chain
    ]
    out = with_chain_relations(rows)
    stats = {k: v for k, v in out[0].items() if k.startswith("stats:") and k.endswith(":value")}
    assert stats == {
        "stats:chain_snapshot:value": "s.t__snapshot",
        "stats:chain_delta:value": "s.t__delta",
        "stats:chain_map:value": "s.t__chain_map",
    }
    assert out[0]["stats:chain_delta:include"] is True and out[1]["stats:chain_snapshot:label"]
    assert [r for r in out[2:] if any(k.startswith("stats:") for k in r)] == []


def test_the_catalog_of_a_schema_without_relations_keeps_its_columns():
    """dbt reads `table_schema` from every schema's catalog table, even an empty one."""
    import agate

    names = ["table_schema", "table_name", "table_type", "column_name"]
    text = [agate.Text()] * len(names)
    empty = agate.Table([], names, text)
    assert list(catalog_with_chain_relations(empty).column_names) == names
    assert list(catalog_with_chain_relations(empty).column_types) == text
    one = agate.Table([("s", "t", "view", "id")], names, text)
    out = catalog_with_chain_relations(one)
    assert list(out.column_names) == names and [tuple(r) for r in out.rows] == [
        ("s", "t", "view", "id")
    ]
