"""chain_input: the option, its refusals (each naming the model and the option) and its stored
property (docs/design.md#full-state-input)."""

import re

import pytest

from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.base.keys import P_CHAIN_INPUT, dropped_options, reserved_property
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.run.changes import full_refresh_reason

BASE = {
    "partition_by": ["region", "dt"],
    "chain_partition_keys": ["dt"],
    "primary_key": ["id", "region", "dt"],
}
FULL = {**BASE, "chain_input": "full"}


def refusal(config: dict) -> str:
    with pytest.raises(ChainConfigError) as e:
        ChainOptions.from_config("customers", config)
    return e.value.msg


def test_changes_is_the_default_and_stores_nothing():
    opts = ChainOptions.from_config("m", BASE)
    assert opts.chain_input == "changes"
    assert P_CHAIN_INPUT not in opts.to_properties()
    explicit = ChainOptions.from_config("m", {**BASE, "chain_input": "changes"})
    assert explicit == opts


def test_full_is_stored_and_read_back():
    opts = ChainOptions.from_config("m", FULL)
    props = opts.to_properties()
    assert props[P_CHAIN_INPUT] == "full"
    assert ChainOptions.from_properties("t__snapshot", props) == opts


ENGINE_REFUSALS = [
    (
        {"chain_input": "full", "merge_engine": engine},
        f"chain_input 'full' takes merge_engine 'deduplicate' only, not '{engine}': "
        "a day's full state is read back as it was given",
    )
    for engine in ("partial-update", "first-row", "aggregation")
]


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"chain_input": "snapshot"}, "chain_input 'snapshot' is not one of ['changes', 'full']"),
        *ENGINE_REFUSALS,
        (
            {"chain_input": "full", "sequence_field": "seq"},
            "chain_input 'full' cannot be used with sequence_field 'seq': the day order "
            "decides which state is the latest",
        ),
        (
            {"chain_input": "full", "rowkind_field": "op"},
            "chain_input 'full' cannot be used with rowkind_field 'op': the adapter keeps "
            "the row kind of the changes it computes itself",
        ),
    ],
)
def test_refusals_name_the_model_and_the_option(extra, message):
    assert refusal({**BASE, **extra}) == f"chain_incremental model 'customers': {message}"


def test_switching_the_input_of_a_chain_needs_a_full_refresh():
    stored = ChainOptions.from_config("m", BASE).to_properties()
    reason = full_refresh_reason(ChainOptions.from_config("m", FULL), "t__snapshot", stored)
    assert reason == "chain_input changes -> full changes how stored partitions are read"
    back = full_refresh_reason(
        ChainOptions.from_config("m", BASE),
        "t__snapshot",
        ChainOptions.from_config("m", FULL).to_properties(),
    )
    assert back == "chain_input full -> changes changes how stored partitions are read"


def test_the_stored_input_is_the_adapters_and_dropped_when_no_longer_configured():
    assert reserved_property(P_CHAIN_INPUT) == (
        "it is a chain option; set it with the model config chain_input"
    )
    full = ChainOptions.from_config("m", FULL).to_properties()
    plain = ChainOptions.from_config("m", BASE).to_properties()
    assert dropped_options(full, plain) == [P_CHAIN_INPUT]
    assert re.fullmatch(r"chaintable\.[a-z-]+", P_CHAIN_INPUT)


def test_a_run_of_a_full_chain_is_refused_until_the_comparison_is_built():
    with pytest.raises(ChainConfigError) as e:
        ModelSettings.from_config("customers", FULL)
    assert e.value.msg == (
        "chain_incremental model 'customers': chain_input 'full' is not available in this "
        "version yet; return the day's changes (chain_input 'changes') or write each extract "
        "with chain_branch 'snapshot'"
    )
    assert ModelSettings.from_config("customers", BASE).opts.chain_input == "changes"
