"""The declared model config (what dbt knows of) and its parsed form (what a run reads)."""

import re
from dataclasses import fields
from pathlib import Path

import pytest

from dbt.adapters.chaintable.base.config import ChainTableConfig, ModelSettings
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.impl import ChainTableAdapter

BASE = {
    "partition_by": ["region", "dt"],
    "chain_partition_keys": ["dt"],
    "primary_key": ["id", "region", "dt"],
}


def test_every_option_in_the_readme_config_table_is_declared_for_dbt():
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    table = readme[readme.index("| config | required | meaning |") :]
    table = table[: table.index("\n\n")]
    documented = set(re.findall(r"^\| `([a-z_]+)`", table, re.M))
    documented |= {
        m
        for row in re.findall(r"^\| (`[a-z_]+`(?:, `[a-z_]+`)+) \|", table, re.M)
        for m in re.findall(r"`([a-z_]+)`", row)
    }
    declared = {f.name for f in fields(ChainTableConfig)}
    dbt_own = {"on_schema_change", "full_refresh"}  # dbt-core's own model configs
    assert "sequence_field" in documented and "partition_expiration_max_num" in documented
    assert documented - dbt_own - declared == set()
    assert ChainTableAdapter.AdapterSpecificConfigs is ChainTableConfig


def test_settings_parse_the_config_once():
    s = ModelSettings.from_config(
        "m",
        {
            **BASE,
            "chain_branch": "delta",
            "chain_partition": "dt=20250101",
            "clustered_by": "id",
            "buckets": 4,
            "location_root": "/lake/",
            "tblproperties": {"a": "b"},
        },
    )
    assert (s.model, s.chain_branch, dict(s.chain_partition or {})) == (
        "m",
        "delta",
        {"dt": "20250101"},
    )
    assert (s.clustered_by, s.buckets, s.file_format, s.on_schema_change) == (
        ("id",),
        4,
        "parquet",
        "ignore",
    )
    assert s.location_of("t__delta") == "/lake/t__delta"
    assert dict(s.tblproperties) == {"a": "b"}
    assert (
        s.opts.group_keys == ("region",)
        and s.layout.path(("CN", "20250101")) == "region=CN/dt=20250101"
    )
    plain = ModelSettings.from_config("m", BASE)
    assert (
        plain.chain_branch,
        plain.chain_partition,
        plain.location_of("t"),
        plain.clustered_by,
    ) == (None, None, None, ())


def test_a_bad_chain_branch_names_the_model_and_the_choices():
    with pytest.raises(
        ChainConfigError,
        match=r"model 'm': chain_branch 'both' is not one of "
        r"\['delta', 'snapshot'\]",
    ):
        ModelSettings.from_config("m", {**BASE, "chain_branch": "both"})


def test_a_chain_partition_of_two_partitions_is_refused():
    with pytest.raises(ChainConfigError, match="exactly one partition is expected"):
        ModelSettings.from_config("m", {**BASE, "chain_partition": "dt=1;dt=2"})


@pytest.mark.parametrize(
    "text,seconds",
    [("5", 5.0), ("5s", 5.0), ("2min", 120.0), ("1500ms", 1.5), ("1h", 3600.0), (" 3 ", 3.0)],
)
def test_a_servers_metadata_cache_time_in_seconds(text, seconds):
    from dbt.adapters.chaintable.chain.catalog import duration_seconds

    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["-1000ms", "0", "-1", "", "soon", "5 weeks"])
def test_a_metadata_cache_kept_for_good_has_no_time(text):
    from dbt.adapters.chaintable.chain.catalog import duration_seconds

    assert duration_seconds(text) is None


@pytest.mark.parametrize(
    "key, why",
    [
        ("merge-engine", "it is a chain option; set it with the model config merge_engine"),
        (
            "fields.v.aggregate-function",
            "it is a chain option; set it with the model config aggregate_functions",
        ),
        ("sequence.field", "it is a chain option; set it with the model config sequence_field"),
        (
            "chaintable.compaction.mode",
            "it is a chain option; set it with the model config chain_compaction",
        ),
        ("chaintable.stale-snapshots", "the adapter keeps the chain's own state under it"),
    ],
)
def test_tblproperties_may_not_set_what_the_adapter_keeps(key, why):
    """A chain option set there would bypass the config's checks and be dropped by the next run."""
    with pytest.raises(ChainConfigError) as e:
        ModelSettings.from_config("m", {**BASE, "tblproperties": {key: "x"}})
    assert str(e.value).endswith(f"chain_incremental model 'm': tblproperties key '{key}': {why}")


def test_tblproperties_may_set_the_views_recent_branches_and_anything_else():
    props = {"chaintable.view-recent-branches": "1", "owner": "o'neil", "fields": "x"}
    s = ModelSettings.from_config("m", {**BASE, "tblproperties": props})
    assert dict(s.tblproperties) == props


def test_a_missing_primary_key_says_that_unique_key_is_not_read():
    """dbt's incremental models spell their key unique_key; a chain model needs primary_key."""
    config = {"partition_by": ["dt"], "unique_key": ["id", "dt"]}
    with pytest.raises(
        ChainConfigError,
        match=r"model 'm': primary_key is required \(a list containing every partition "
        r"column\); unique_key \['id', 'dt'\] is not read by chain_incremental$",
    ):
        ModelSettings.from_config("m", config)
    with pytest.raises(ChainConfigError, match=r"every partition column\)$"):
        ModelSettings.from_config("m", {"partition_by": ["dt"]})


def test_an_operations_relation_argument_in_every_spelling():
    from dbt.adapters.chaintable.chain.tables import split_relation

    assert split_relation("t", "dflt") == ("dflt", "t")
    assert split_relation("s.t", "dflt") == ("s", "t")
    assert split_relation("`s`.`t`", "dflt") == ("s", "t")
    assert split_relation("`t`", "dflt") == ("dflt", "t")
    assert split_relation("spark_catalog.s.t", "dflt") == ("s", "t")
    with pytest.raises(
        ChainConfigError, match=r"relation 's\.' is not a table name \(schema\.name\)$"
    ):
        split_relation("s.", "dflt")
