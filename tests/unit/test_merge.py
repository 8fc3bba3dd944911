"""SQL of the chain merge per engine (merge/), no Spark: the structure that carries each rule.
The rows it produces are checked on real Spark in tests/functional/test_merge_engines.py."""

import re

import pytest

from dbt.adapters.chaintable.base.keys import dropped_options
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.merge import rules
from dbt.adapters.chaintable.merge import sql as merge
from dbt.adapters.chaintable.merge.engines import engine_of
from dbt.adapters.chaintable.merge.rules import ANCHOR, ORD, RESET, RETRACT
from dbt.adapters.chaintable.run import stage


def refusal(o, columns):
    """Why the chain's engine refuses a -U/-D row (None: it takes them)."""
    return engine_of(o).refusal(o, columns)


COLS = ["id", "v", "n", "seq", "op", "dt"]
ANCHOR_SQL, DELTA_SQL = "SELECT * FROM a", "SELECT * FROM d"


def opts(**config) -> ChainOptions:
    base = {"partition_by": ["dt"], "primary_key": ["id", "dt"], "rowkind_field": "op"}
    if config.get("merge_engine") != "first-row":
        base["sequence_field"] = "seq"
    return ChainOptions.from_config("t", {**base, **config})


def flat(sql: str) -> str:
    return re.sub(r"\s+", " ", sql)


class TestOrder:
    def test_sequence_then_partition_then_retractions_first(self):
        hourly = ChainOptions.from_config(
            "t",
            {
                "partition_by": ["region", "dt", "hour"],
                "chain_partition_keys": ["dt", "hour"],
                "primary_key": ["id", "region", "dt", "hour"],
                "sequence_field": "seq",
                "rowkind_field": "op",
            },
        )
        assert rules.order_terms(hourly) == [
            "`seq` DESC NULLS LAST",
            "`dt` DESC NULLS LAST",
            "`hour` DESC NULLS LAST",
            f"CASE WHEN {RETRACT} THEN 0 ELSE 1 END DESC NULLS LAST",
        ]
        assert rules.order_terms(hourly, descending=False)[0] == "`seq` ASC NULLS FIRST"

    def test_without_sequence_and_rowkind_the_later_partition_wins(self):
        plain = ChainOptions(partition_by=("dt",), chain_keys=("dt",), primary_key=("id", "dt"))
        assert rules.order_terms(plain) == ["`dt` DESC NULLS LAST"]
        assert rules.is_retract(plain) == "false"

    def test_anchor_rows_are_never_retractions(self):
        sql = flat(merge.merge_sql(opts(), COLS, ANCHOR_SQL, DELTA_SQL))
        assert f"(NOT {ANCHOR} AND coalesce(`op` IN ('-U', '-D'), false)) AS {RETRACT}" in sql


class TestMergeSqlShape:
    def test_untouched_anchor_keys_pass_through_an_anti_join(self):
        sql = flat(merge.merge_sql(opts(), COLS, ANCHOR_SQL, DELTA_SQL))
        untouched, merged = sql.split(" UNION ALL ", 1)
        assert untouched.startswith("SELECT __a.`id`, __a.`v`")
        assert "LEFT ANTI JOIN (SELECT DISTINCT `id` FROM (SELECT * FROM d) __dk)" in untouched
        assert f"true AS {ANCHOR} FROM (SELECT * FROM a) __a LEFT SEMI JOIN" in merged
        assert f"false AS {ANCHOR} FROM (SELECT * FROM d) __e" in merged

    def test_no_anchor_merges_deltas_only(self):
        sql = flat(merge.merge_sql(opts(), COLS, None, DELTA_SQL))
        assert "ANTI JOIN" not in sql and f"false AS {ANCHOR}" in sql

    def test_primary_key_of_partition_columns_only(self):
        o = ChainOptions(partition_by=("dt",), chain_keys=("dt",), primary_key=("dt",))
        sql = flat(merge.merge_sql(o, ["v", "dt"], ANCHOR_SQL, DELTA_SQL))
        assert "SELECT DISTINCT true AS __chain_any" in sql and "ON true" in sql
        assert "PARTITION BY true" in sql

    def test_rows_merge_per_merge_key_or_per_partition(self):
        o = opts()
        assert "PARTITION BY `id` ORDER BY" in merge.merge_rows_sql(o, COLS, DELTA_SQL)
        assert "PARTITION BY `id`, `dt` ORDER BY" in merge.merge_rows_sql(
            o, COLS, DELTA_SQL, by_partition=True
        )


class TestEngines:
    def test_deduplicate_keeps_the_latest_row_unless_it_retracts(self):
        sql = flat(merge.merge_rows_sql(opts(), COLS, DELTA_SQL))
        assert f"ORDER BY {', '.join(rules.order_terms(opts()))}) AS {ORD}" in sql
        assert sql.endswith(f"WHERE {ORD} = 1 AND NOT {RETRACT}")

    def test_first_row_keeps_the_earliest_and_ignores_retractions(self):
        o = opts(merge_engine="first-row")
        sql = flat(merge.merge_rows_sql(o, COLS, DELTA_SQL))
        assert "`dt` ASC NULLS FIRST" in sql and f"WHERE NOT {RETRACT}" in sql
        assert sql.endswith(f"WHERE {ORD} = 1")

    def test_partial_update_latest_non_null_per_column(self):
        sql = flat(
            merge.merge_rows_sql(
                opts(merge_engine="partial-update", partial_update_ignore_delete=True),
                COLS,
                DELTA_SQL,
            )
        )
        for c in ("v", "n", "seq", "op", "dt"):
            assert f"max_by(`{c}`, CASE WHEN `{c}` IS NOT NULL THEN {ORD} END) AS `{c}`" in sql
        assert f"WHERE NOT {RETRACT}" in sql and "GROUP BY `id`" in sql and RESET not in sql

    def test_partial_update_remove_on_delete_restarts_after_last_delete_ignores_minus_u(self):
        sql = flat(
            merge.merge_rows_sql(
                opts(merge_engine="partial-update", partial_update_remove_record_on_delete=True),
                COLS,
                DELTA_SQL,
            )
        )
        assert f"WHERE NOT ({RETRACT} AND `op` = '-U')" in sql
        assert f"max(CASE WHEN {RETRACT} THEN {ORD} END) OVER (PARTITION BY `id`) AS {RESET}" in sql
        assert f"WHERE NOT {RETRACT} AND {ORD} > coalesce({RESET}, 0)" in sql

    def test_partial_update_refuses_deletes_by_default(self):
        o = opts(merge_engine="partial-update")
        assert "cannot take -U/-D rows" in refusal(o, COLS)
        sql = flat(merge.merge_rows_sql(o, COLS, DELTA_SQL))
        assert f"CASE WHEN {RETRACT} THEN raise_error(concat('chain merge: ', 'merge_engine" in sql
        assert "'; got ', `op`, ' for key '" in sql

    def test_aggregation_functions_and_retractions(self):
        o = opts(
            merge_engine="aggregation",
            aggregate_functions={"n": "sum", "v": "listagg"},
            ignore_retract=["v"],
        )
        sql = flat(merge.merge_rows_sql(o, COLS, DELTA_SQL))
        assert f"sum(CASE WHEN {RETRACT} THEN -`n` ELSE `n` END) AS `n`" in sql
        assert (
            f"listagg(CASE WHEN NOT {RETRACT} THEN `v` END, ',') WITHIN GROUP (ORDER BY {ORD})"
            in sql
        )
        assert "max(`seq`) AS `seq`" in sql
        assert (
            f"coalesce(max_by(`op`, CASE WHEN NOT {RETRACT} THEN {ORD} END), '+I') AS `op`" in sql
        )
        assert f"max_by(`dt`, {ORD}) AS `dt`" in sql
        assert "raise_error" not in sql and "GROUP BY `id`" in sql

    @pytest.mark.parametrize(
        "fn,expected",
        [
            (
                "count",
                f"sum(CASE WHEN {ANCHOR} THEN coalesce(`n`, 0) WHEN `n` IS NULL THEN 0 "
                f"WHEN {RETRACT} THEN -1 ELSE 1 END)",
            ),
            ("product", "try_divide(aggregate(collect_list(CASE WHEN NOT"),
            ("max", f"max(CASE WHEN NOT {RETRACT} THEN `n` END)"),
            ("bool_or", f"bool_or(CASE WHEN NOT {RETRACT} THEN `n` END)"),
            ("first_value", f"min_by(`n`, CASE WHEN NOT {RETRACT} THEN {ORD} END)"),
            ("last_value", f"max_by(`n`, CASE WHEN NOT {RETRACT} THEN {ORD} END)"),
            (
                "first_non_null_value",
                f"min_by(`n`, CASE WHEN NOT {RETRACT} AND `n` IS NOT NULL THEN {ORD} END)",
            ),
            (
                "last_non_null_value",
                f"max_by(`n`, CASE WHEN NOT {RETRACT} AND `n` IS NOT NULL THEN {ORD} END)",
            ),
        ],
    )
    def test_aggregate_function_sql(self, fn, expected):
        o = opts(merge_engine="aggregation", aggregate_functions={"n": fn}, ignore_retract=["v"])
        assert expected in flat(merge.merge_rows_sql(o, COLS, DELTA_SQL))

    def test_count_ignoring_retractions_and_product_dividing(self):
        o = opts(
            merge_engine="aggregation",
            aggregate_functions={"n": "count", "v": "product"},
            ignore_retract=["n"],
        )
        sql = flat(merge.merge_rows_sql(o, COLS, DELTA_SQL))
        assert f"WHEN {RETRACT} THEN 0 ELSE 1 END" in sql
        assert f"collect_list(CASE WHEN {RETRACT} THEN CAST(`v` AS DOUBLE) END)" in sql

    def test_aggregation_refuses_retractions_of_other_functions(self):
        o = opts(merge_engine="aggregation", aggregate_functions={"n": "max"})
        reason = refusal(o, COLS)
        assert "(v: last_non_null_value, n: max)" in reason and "ignore_retract" in reason
        assert "raise_error" in merge.merge_rows_sql(o, COLS, DELTA_SQL)
        assert (
            refusal(
                opts(
                    merge_engine="aggregation",
                    aggregate_functions={"n": "max"},
                    ignore_retract=["n", "v"],
                ),
                COLS,
            )
            is None
        )
        no_kind = ChainOptions.from_config(
            "t",
            {"partition_by": ["dt"], "primary_key": ["id", "dt"], "merge_engine": "aggregation"},
        )
        assert refusal(no_kind, COLS) is None

    def test_types_keep_widened_aggregates_in_the_column_type(self):
        o = opts(
            merge_engine="aggregation",
            aggregate_functions={"n": "product", "v": "max"},
            ignore_retract=["v"],
        )
        sql = flat(
            merge.merge_sql(o, COLS, ANCHOR_SQL, DELTA_SQL, types={"n": "int", "v": "string"})
        )
        assert re.search(r"CAST\(round\(CASE WHEN count\(`n`\) = 0 .* END\) AS int\) AS `n`", sql)
        assert "CAST(max(" not in sql


class TestStageChecks:
    def test_ties_group_by_primary_key_sequence_and_kind_class(self):
        sql = flat(stage.tied_sql(opts(), COLS, "SELECT * FROM stage"))
        assert (
            "SELECT `id`, `dt`, `seq`, count(*) FROM" in sql
            and f"GROUP BY `id`, `dt`, `seq`, CASE WHEN {RETRACT} THEN 0 ELSE 1 END "
            "HAVING count(*) > 1 LIMIT 1"
            in sql
        )

    def test_aggregation_ties_matter_only_for_order_sensitive_columns(self):
        commutative = opts(
            merge_engine="aggregation",
            aggregate_functions={"n": "sum", "v": "max"},
            rowkind_field=None,
        )
        no_op = [c for c in COLS if c != "op"]
        assert stage.tied_sql(commutative, no_op, "SELECT * FROM stage") is None
        sensitive = opts(merge_engine="aggregation", aggregate_functions={"n": "sum"})
        assert "count(DISTINCT struct(`v`, `op`)) > 1" in stage.tied_sql(
            sensitive, COLS, "SELECT * FROM stage"
        )

    def test_one_scan_summarises_every_rule_per_partition(self):
        sql = flat(
            stage.stage_summary_sql(
                opts(merge_engine="partial-update"),
                COLS,
                "SELECT * FROM stage",
                "`dt` = '20250101'",
            )
        )
        assert sql == (
            "SELECT CAST(`dt` AS STRING), count(*), count(DISTINCT `id`), "
            "count_if(`id` IS NULL OR `dt` IS NULL), "
            "count_if(NOT coalesce(`op` IN ('+I', '-U', '+U', '-D'), false)), "
            "count_if(coalesce(`op` IN ('-U', '-D'), false)), NOT (`dt` = '20250101') "
            "FROM (SELECT * FROM stage) __s GROUP BY `dt`"
        )
        plain = flat(stage.stage_summary_sql(opts(rowkind_field=None), COLS, "x"))
        assert "count_if(false), count_if(false), false FROM" in plain
        # a primary key of partition columns only: any second row in a partition may tie
        keyless = ChainOptions(partition_by=("dt",), chain_keys=("dt",), primary_key=("dt",))
        assert "count(*), least(count(*), 1)," in stage.stage_summary_sql(keyless, COLS, "x")

    def test_ignored_rows_never_tie_and_kinds_are_checked(self):
        sql = stage.tied_sql(opts(merge_engine="first-row"), COLS, "SELECT * FROM stage")
        assert f"WHERE NOT {RETRACT}" in sql
        assert "NOT coalesce(`op` IN ('+I', '-U', '+U', '-D'), false)" in stage.bad_kind_sql(
            opts(), "SELECT * FROM stage"
        )
        assert stage.bad_kind_sql(opts(rowkind_field=None), "x") is None
        assert stage.refused_sql(opts(), COLS, "x") is None
        assert "WHERE coalesce(`op` IN ('-U', '-D'), false)" in stage.refused_sql(
            opts(merge_engine="partial-update"), COLS, "x"
        )


@pytest.mark.parametrize(
    "config,message",
    [
        ({"merge_engine": "aggregation", "aggregate_functions": {"op": "max"}}, "rowkind_field"),
        (
            {
                "merge_engine": "partial-update",
                "partial_update_ignore_delete": True,
                "partial_update_remove_record_on_delete": True,
            },
            "contradict",
        ),
        ({"merge_engine": "aggregation", "aggregate_functions": {"seq": "max"}}, "sequence_field"),
        ({"merge_engine": "first-row", "sequence_field": "seq"}, "first-row"),
    ],
)
def test_engine_options_refused(config, message):
    with pytest.raises(ChainConfigError, match=message):
        opts(**config)


GROUP_COLS = ["id", "a", "b", "g_1", "c", "d", "g_2", "g_3", "e", "op", "dt"]


def grouped(**config) -> ChainOptions:
    base = {
        "partition_by": ["dt"],
        "primary_key": ["id", "dt"],
        "merge_engine": "partial-update",
        "sequence_groups": {"g_1": ["a", "b"], "g_2,g_3": "c,d"},
    }
    return ChainOptions.from_config("t", {**base, **config})


class TestSequenceGroups:
    """The SQL of each rule; the rows on Spark: tests/functional/test_sequence_groups_sql.py."""

    G1 = f"CASE WHEN ({ANCHOR} OR `g_1` IS NOT NULL) THEN struct(`g_1`, {ORD}) END"
    G2 = (
        f"CASE WHEN ({ANCHOR} OR `g_2` IS NOT NULL OR `g_3` IS NOT NULL) "
        f"THEN struct(`g_2`, `g_3`, {ORD}) END"
    )

    def test_members_and_sequences_take_the_group_winner_s_values(self):
        sql = flat(merge.merge_rows_sql(grouped(rowkind_field="op"), GROUP_COLS, DELTA_SQL))
        assert f"max_by(`g_1`, {self.G1}) AS `g_1`" in sql
        for c in ("a", "b"):  # a winning retraction leaves NULL
            assert f"max_by(CASE WHEN NOT {RETRACT} THEN `{c}` END, {self.G1}) AS `{c}`" in sql
        for c in ("g_2", "g_3"):
            assert f"max_by(`{c}`, {self.G2}) AS `{c}`" in sql
        assert f"max_by(CASE WHEN NOT {RETRACT} THEN `c` END, {self.G2}) AS `c`" in sql
        # merge order first: the group order's tie-break is the row's rank in it
        assert f"ORDER BY {', '.join(rules.order_terms(grouped(rowkind_field='op'), False))}" in sql

    def test_other_columns_keep_the_latest_non_null_of_inserts(self):
        sql = flat(merge.merge_rows_sql(grouped(rowkind_field="op"), GROUP_COLS, DELTA_SQL))
        for c in ("e", "op", "dt"):
            expected = (
                f"max_by(`{c}`, CASE WHEN NOT {RETRACT} AND `{c}` IS NOT NULL THEN {ORD} END)"
            )
            assert f"{expected} AS `{c}`" in sql

    def test_retractions_are_taken_and_a_key_without_inserts_is_removed(self):
        o = grouped(rowkind_field="op")
        assert refusal(o, GROUP_COLS) is None
        sql = flat(merge.merge_rows_sql(o, GROUP_COLS, DELTA_SQL))
        assert "raise_error" not in sql and f"WHERE NOT {RETRACT}" not in sql
        assert sql.endswith(f"GROUP BY `id` HAVING count_if(NOT {RETRACT}) > 0")
        # the cumulative delta's tombstone: a '-D' row instead of none
        kept = flat(merge.merge_select(o, GROUP_COLS, DELTA_SQL, ["id"], None, keep_deletes=True))
        assert f"CASE WHEN count_if(NOT {RETRACT}) = 0 THEN '-D' ELSE max_by(`op`" in kept
        assert "HAVING" not in kept

    def test_ignore_delete_drops_retractions_before_the_groups(self):
        o = grouped(rowkind_field="op", partial_update_ignore_delete=True)
        assert f"WHERE NOT {RETRACT}" in flat(merge.merge_rows_sql(o, GROUP_COLS, DELTA_SQL))

    def test_member_functions_aggregate_the_group_s_rows_in_group_order(self):
        o = grouped(
            rowkind_field="op",
            aggregate_functions={"b": "sum", "c": "listagg", "d": "first_value"},
            ignore_retract=["c", "d"],
        )
        assert refusal(o, GROUP_COLS) is None  # sum retracts, the others ignore them
        sql = flat(merge.merge_rows_sql(o, GROUP_COLS, DELTA_SQL, types={"b": "int"}))
        b = f"(CASE WHEN ({ANCHOR} OR `g_1` IS NOT NULL) THEN `b` END)"
        assert f"CAST(sum(CASE WHEN {RETRACT} THEN -{b} ELSE {b} END) AS int) AS `b`" in sql
        c = f"(CASE WHEN ({ANCHOR} OR `g_2` IS NOT NULL OR `g_3` IS NOT NULL) THEN `c` END)"
        assert (
            f"listagg(CASE WHEN NOT {RETRACT} THEN {c} END, ',') "
            f"WITHIN GROUP (ORDER BY {self.G2}) AS `c`"
        ) in sql
        assert f"min_by((CASE WHEN ({ANCHOR} OR `g_2`" in sql
        assert f"CASE WHEN NOT {RETRACT} THEN {self.G2} END) AS `d`" in sql

    def test_a_member_function_that_cannot_retract_refuses_retractions(self):
        o = grouped(rowkind_field="op", aggregate_functions={"b": "max"})
        assert refusal(o, GROUP_COLS) == (
            "aggregate functions cannot retract -U/-D rows (b: max); only sum, product, count "
            "can, list other columns in ignore_retract"
        )
        assert (
            refusal(grouped(rowkind_field="op", aggregate_functions={"b": "sum"}), GROUP_COLS)
            is None
        )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"sequence_groups": {"g_1": ["a", "b"], "g_2": ["b", "c"]}},
            "chain_incremental model 't': column 'b' is in two sequence groups: 'g_1' and 'g_2'",
        ),
        (
            {"sequence_groups": {"g_1": ["a"], "g_2": ["g_1"]}},
            "column 'g_1' is in two sequence groups: 'g_1' and 'g_2'",
        ),
        (
            {"sequence_groups": {"g_1": ["a", "id"]}},
            "sequence group 'g_1' contains column 'id', a primary key column",
        ),
        (
            {"sequence_groups": {"g_1": ["a", "dt"]}},
            "sequence group 'g_1' contains column 'dt', a partition column",
        ),
        (
            {"sequence_groups": {"id": ["a"]}},
            "sequence group 'id' contains column 'id', a primary key column",
        ),
        (
            {"sequence_field": "seq", "sequence_groups": {"seq": ["a"]}},
            "sequence group 'seq' contains column 'seq', the sequence_field",
        ),
        (
            {"rowkind_field": "op", "sequence_groups": {"g_1": ["op"]}},
            "sequence group 'g_1' contains column 'op', the rowkind_field",
        ),
        (
            {"merge_engine": "deduplicate"},
            "chain_incremental model 't': sequence_groups needs merge_engine 'partial-update', "
            "not 'deduplicate'",
        ),
        (
            {"merge_engine": "aggregation"},
            "sequence_groups needs merge_engine 'partial-update', not 'aggregation'",
        ),
        (
            {"rowkind_field": "op", "partial_update_remove_record_on_delete": True},
            "partial_update_remove_record_on_delete cannot be used with sequence_groups",
        ),
        (
            {"aggregate_functions": {"e": "sum"}},
            "aggregate function 'sum' for column 'e' needs the column in a sequence group",
        ),
        (
            {"aggregate_functions": {"g_1": "max"}},
            "column 'g_1' is a sequence group's sequence and cannot have an aggregate function",
        ),
        ({"sequence_groups": ["a", "b"]}, "sequence_groups must be a dict"),
        ({"sequence_groups": {"g_1": []}}, "sequence_groups['g_1'] needs a sequence column"),
    ],
)
def test_sequence_group_configs_refused(config, message):
    with pytest.raises(ChainConfigError, match=re.escape(message)):
        grouped(**config)


def test_sequence_groups_round_trip_through_paimon_keys():
    o = grouped(aggregate_functions={"b": "max", "d": "sum", "e": "last_non_null_value"})
    props = o.to_properties()
    assert props["fields.g_1.sequence-group"] == "a,b"
    assert props["fields.g_2,g_3.sequence-group"] == "c,d"
    assert props["fields.b.aggregate-function"] == "max"
    assert o.sequence_groups == ((("g_1",), ("a", "b")), (("g_2", "g_3"), ("c", "d")))
    assert ChainOptions.from_properties("t__delta", props) == o


def test_group_columns_and_sequence_types_checked_against_the_model():
    o = grouped()
    cols = GROUP_COLS
    o.validate_columns("t", cols, dict.fromkeys(cols, "int") | {"g_3": "timestamp"})
    o.validate_columns("t", cols, dict.fromkeys(cols, "decimal(10,2)"))
    with pytest.raises(ChainConfigError) as e:
        o.validate_columns("t", cols, dict.fromkeys(cols, "int") | {"g_3": "string"})
    assert str(e.value).endswith(
        "chain_incremental model 't': sequence_groups sequence column 'g_3' has type string; "
        "a group's sequence must be a number, a date or a timestamp"
    )
    with pytest.raises(ChainConfigError, match="sequence_groups column 'g_3' is not in"):
        o.validate_columns("t", [c for c in cols if c != "g_3"])


def test_options_taken_out_of_the_config_are_the_stored_keys_to_unset():
    stored = grouped(aggregate_functions={"d": "sum"}, ignore_retract=["a"]).to_properties()
    now = grouped().to_properties()
    assert dropped_options(stored | {"owner": "x"}, now) == [
        "fields.a.ignore-retract",
        "fields.d.aggregate-function",
    ]
    fewer = ChainOptions.from_config(
        "t",
        {
            "partition_by": ["dt"],
            "primary_key": ["id", "dt"],
            "merge_engine": "partial-update",
            "sequence_groups": {"g_1": ["a", "b"]},
        },
    ).to_properties()
    assert dropped_options(stored, fewer) == [
        "fields.a.ignore-retract",
        "fields.d.aggregate-function",
        "fields.g_2,g_3.sequence-group",
    ]
    assert dropped_options(now, now) == []
