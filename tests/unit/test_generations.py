"""The snapshot partitions' tokens and the records made under them stay within the metastore's
limit on a property value however long the chain grows, and a token once gone never comes back
(chain/generations.py)."""

from __future__ import annotations

import datetime as dt
import json
import random

from dbt.adapters.chaintable.base.keys import (
    P_ANCHOR_SEQUENCE,
    P_COMPACTED,
    P_SNAPSHOT_GENERATIONS,
)
from dbt.adapters.chaintable.chain import generations as G
from tests.unit.fake_catalog import METASTORE_VALUE_LIMIT
from tests.unit.test_golden_sql import setup as chain_setup


def test_under_the_budget_every_present_partition_keeps_its_token():
    tokens = {"dt=1": "r1", "dt=2": "r2", "dt=3": "r3"}
    got = G.renewed(tokens, kept={"dt=1", "dt=2"}, written={"dt=4"}, token="r4", floor=lambda: "f")
    assert got == {"dt=1": "r1", "dt=2": "r2", "dt=4": "r4"}  # dt=3 gone; no floor needed
    assert G.token_of(got, "dt=3") is None


def test_over_the_budget_the_partitions_given_tokens_longest_ago_take_a_fresh_floor():
    tokens = {f"dt={i}": f"r{i:02d}" for i in range(10)}
    written = {"dt=10"}
    budget = len(G.dumps({"": "f9", "dt=10": "r10", "dt=9": "r09", "dt=8": "r08"}))
    got = G.renewed(tokens, set(tokens), written, "r10", lambda: "f9", budget)
    assert got == {"": "f9", "dt=10": "r10", "dt=9": "r09", "dt=8": "r08"}
    assert len(G.dumps(got)) <= budget
    assert G.token_of(got, "dt=0") == "f9"
    # the next pruning gives the floor another token: what was made under "f9" no longer counts
    again = G.renewed(got, set(got) - {""}, {"dt=11"}, "r11", lambda: "f10", budget)
    assert again == {"": "f10", "dt=11": "r11", "dt=10": "r10"}  # "f10" is longer than "f9"


def test_entries_of_another_token_are_dropped_and_the_newest_kept_within_the_budget():
    tokens = {"": "f1", "dt=1": "r1", "dt=2": "r2"}
    entries = {
        "dt=1": ["r1", "seq:bigint", 5],
        "dt=2": ["r0", "seq:bigint", 6],  # made before dt=2 was written again
        "dt=3": ["f1", "seq:bigint", 7],  # under the floor
        "dt=4": ["f0", "seq:bigint", 8],  # under an older floor
        "dt=5": "junk",
    }
    assert G.current_entries(entries, tokens) == {
        "dt=1": ["r1", "seq:bigint", 5],
        "dt=3": ["f1", "seq:bigint", 7],
    }
    budget = len(G.dumps({"dt=1": ["r1", "seq:bigint", 5]}))
    assert G.current_entries(entries, tokens, budget) == {"dt=1": ["r1", "seq:bigint", 5]}
    # a chain from before the tokens: None on both sides counts, until a floor exists
    assert G.current_entries({"dt=9": [None, "s", 1]}, {}) == {"dt=9": [None, "s", 1]}
    assert G.current_entries({"dt=9": [None, "s", 1]}, {"": "f2"}) == {}


def test_an_entry_counts_only_while_its_partition_was_not_written_since():
    """Random publishes with a small budget (prunings all along) and entries made under each
    partition's token at random times: an entry still current was made after the partition's
    last write. Each run id is fresh, as versions.new_run_id gives them."""
    for seed in range(30):
        rnd = random.Random(seed)
        ids = iter(f"{n:06d}" for n in range(10**6))
        tokens: dict[str, str] = {}
        present: set[str] = set()
        last_write: dict[str, int] = {}
        entries: dict[str, tuple[str | None, int]] = {}
        prunings = 0
        for step in range(200):
            written = {f"dt={rnd.randrange(40)}" for _ in range(rnd.randrange(1, 4))}
            gone = {p for p in present if rnd.random() < 0.05} - written
            present = (present - gone) | written
            before = tokens.get("")
            tokens = G.renewed(tokens, present - written, written, next(ids), ids.__next__, 300)
            prunings += tokens.get("") != before
            assert len(G.dumps(tokens)) <= 300
            for p in written:
                last_write[p] = step
            for p in rnd.sample(sorted(present), min(3, len(present))):
                entries[p] = (G.token_of(tokens, p), step)
            for p, (token, made) in entries.items():
                if p in present and token == G.token_of(tokens, p):
                    assert made >= last_write[p], (seed, step, p)
        assert prunings > 5, seed  # the budget bit


def days(n: int) -> list[str]:
    start = dt.date(2020, 1, 1)
    return [(start + dt.timedelta(days=i)).strftime("%Y%m%d") for i in range(n)]


def test_a_chain_compacted_daily_for_years_still_publishes():
    """1,500 snapshot partitions, each with a token and an anchor entry as the adapter wrote
    them before the budget (about 60,000 characters each: more than any metastore takes). A
    compaction publishes: both records shrink within the budget, the partition written and
    the newest others keep their tokens and entries, the compaction is recorded, and every
    value written stays within the metastore's limit (the fake refuses one over it)."""
    d = days(1504)
    conns, adapter, rel = chain_setup(
        recent=7,
        branches={
            "snapshot": [("CN", x) for x in d[:1500]],
            "delta": [("CN", x) for x in d[1500:]],
        },
    )
    table = conns.tables["s.t__snapshot"]
    old_tokens = {f"region=CN/dt={x}": f"2020{i:010d}-0000000{i % 10}" for i, x in enumerate(d)}
    del old_tokens[f"region=CN/dt={d[1503]}"]
    old_entries = {p: [t, "seq:bigint", i] for i, (p, t) in enumerate(old_tokens.items())}
    table.props[P_SNAPSHOT_GENERATIONS] = json.dumps(old_tokens)
    table.props[P_ANCHOR_SEQUENCE] = json.dumps(old_entries)
    assert len(table.props[P_SNAPSHOT_GENERATIONS]) > 2 * METASTORE_VALUE_LIMIT
    conns.answer("count(*), max(CAST(", [("CN", d[1503], 10, 42)])
    assert adapter.chain_compact(rel, {"dt": d[1503]}) is True
    tokens = json.loads(table.props[P_SNAPSHOT_GENERATIONS])
    entries = json.loads(table.props[P_ANCHOR_SEQUENCE])
    assert len(table.props[P_SNAPSHOT_GENERATIONS]) <= G.BUDGET
    assert len(table.props[P_ANCHOR_SEQUENCE]) <= G.BUDGET
    written = f"region=CN/dt={d[1503]}"
    newest = f"region=CN/dt={d[1499]}"
    assert tokens[written] not in old_tokens.values() and tokens[newest] == old_tokens[newest]
    assert tokens[""] not in old_tokens.values()  # a fresh floor
    assert f"region=CN/dt={d[0]}" not in tokens  # the oldest take the floor
    assert entries[written] == [tokens[written], "seq:bigint", 42]
    assert entries[newest] == old_entries[newest]
    assert all(e[0] == G.token_of(tokens, p) for p, e in entries.items())
    assert written in json.loads(table.props[P_COMPACTED])
