"""Which snapshot partitions still equal the merged read compaction wrote them from
(chain/lineage.py): the record after a compaction, and each change of the chain that voids it."""

import json
from dataclasses import replace

from test_view_layout import GROUPED  # region + dt

from dbt.adapters.chaintable.chain import generations, lineage
from dbt.adapters.chaintable.chain.state import ChainState

D = ["20250801", "20250802", "20250803", "20250804", "20250805"]
COLS = ["id", "v", "region", "dt"]


def chain(snaps=(("CN", D[0]), ("CN", D[3])), deltas=D[1:]):
    return ChainState.build(GROUPED, list(snaps), [("CN", d) for d in deltas], {"dt": "string"})


TOKENS = {"region=CN/dt=20250801": "t1", "region=CN/dt=20250804": "t4"}


def recorded(deltas=D[1:], tokens=TOKENS):
    """CN's day 04 compacted from anchor 01 and its deltas up to 04."""
    plan = chain(snaps=[("CN", D[0])], deltas=deltas).plan_read(("CN",), (D[3],))
    return lineage.record(chain(deltas=deltas), {}, [plan], tokens, COLS)


def test_a_compaction_is_recorded_with_its_anchor_and_both_tokens():
    entries = recorded()
    assert list(entries) == ["region=CN/dt=20250804"]
    token, anchor, anchor_token, digest = entries["region=CN/dt=20250804"]
    assert (token, anchor, anchor_token) == ("t4", "region=CN/dt=20250801", "t1")
    assert len(digest) == 16
    assert lineage.compacted(chain(), entries, TOKENS, {}, COLS) == {("CN", D[3]): (D[0],)}


def test_what_voids_the_record():
    entries = recorded()
    valid = {("CN", D[3]): (D[0],)}
    assert lineage.compacted(chain(), entries, TOKENS, {}, COLS) == valid
    # the partition written again (a full write gives it a new token)
    assert (
        lineage.compacted(chain(), entries, {**TOKENS, "region=CN/dt=20250804": "x"}, {}, COLS)
        == {}
    )
    # its anchor written again
    assert (
        lineage.compacted(chain(), entries, {**TOKENS, "region=CN/dt=20250801": "x"}, {}, COLS)
        == {}
    )
    # a delta it read rewritten: the partition is marked stale
    stale = {"region=CN/dt=20250804": "region=CN/dt=20250802"}
    assert lineage.compacted(chain(), entries, TOKENS, stale, COLS) == {}
    # a snapshot written between its anchor and it: its merged read has another anchor
    between = chain(snaps=[("CN", D[0]), ("CN", D[1]), ("CN", D[3])])
    assert (
        lineage.compacted(between, entries, {**TOKENS, "region=CN/dt=20250802": "t2"}, {}, COLS)
        == {}
    )
    # a delta it read dropped
    assert lineage.compacted(chain(deltas=[D[1], D[3], D[4]]), entries, TOKENS, {}, COLS) == {}
    # a delta added between its anchor and it (a day that had none): a merge it did not read
    gap = recorded(deltas=[D[1], D[3], D[4]])
    assert lineage.compacted(chain(deltas=[D[1], D[3], D[4]]), gap, TOKENS, {}, COLS) == valid
    assert lineage.compacted(chain(), gap, TOKENS, {}, COLS) == {}
    # deltas after it change nothing it read
    assert lineage.compacted(chain(deltas=D[1:4]), entries, TOKENS, {}, COLS) == valid
    # its own delta gone: no compaction writes a day without one
    assert lineage.compacted(chain(deltas=D[1:3] + D[4:]), entries, TOKENS, {}, COLS) == {}
    # the partition itself gone
    assert lineage.compacted(chain(snaps=[("CN", D[0])]), entries, TOKENS, {}, COLS) == {}


def test_a_record_keeps_the_entries_of_partitions_still_there_only():
    entries = {"region=CN/dt=20250803": ["old", "", None, "d"], **recorded()}
    state = chain()  # 03 is no snapshot partition any more
    plan = state.plan_read(("CN",), (D[4],), use_snapshot=False)
    out = lineage.record(state, entries, [plan], {**TOKENS, "region=CN/dt=20250805": "t5"}, COLS)
    assert list(out) == ["region=CN/dt=20250804", "region=CN/dt=20250805"]
    assert out["region=CN/dt=20250805"][:3] == ["t5", "region=CN/dt=20250804", "t4"]


def test_a_compaction_of_deltas_only_has_no_anchor():
    state = chain(snaps=[("CN", D[3])])
    plan = chain(snaps=[]).plan_read(("CN",), (D[3],))
    entries = lineage.record(state, {}, [plan], TOKENS, COLS)
    assert entries["region=CN/dt=20250804"][1:3] == ["", None]
    assert lineage.compacted(state, entries, TOKENS, {}, COLS) == {("CN", D[3]): None}


def test_the_newest_compactions_are_kept_per_group_and_in_the_budget(monkeypatch):
    days = [f"202508{d:02d}" for d in range(1, 10)]
    groups = ("CN", "US", "EU")
    state = ChainState.build(
        GROUPED,
        [(g, d) for g in groups for d in days],
        [(g, d) for g in groups for d in days[1:]],
        {"dt": "string"},
    )
    writes = [state.plan_read((g,), (d,), use_snapshot=False) for g in groups for d in days[1:]]
    entries = lineage.record(state, {}, writes, {}, COLS)
    assert sorted(entries) == sorted(
        f"region={g}/dt={d}" for g in groups for d in days[-lineage.PER_GROUP :]
    )
    one = len(json.dumps({"region=CN/dt=20250809": entries["region=CN/dt=20250809"]}))
    monkeypatch.setattr(generations, "BUDGET", 2 + 5 * one)  # five entries' worth
    entries = lineage.record(state, entries, [], {}, COLS)
    # the newest five: the three groups' newest day, then two of the day before (ties go to
    # the later path)
    assert sorted(entries) == [
        "region=CN/dt=20250809",
        "region=EU/dt=20250808",
        "region=EU/dt=20250809",
        "region=US/dt=20250808",
        "region=US/dt=20250809",
    ]


def test_new_merge_options_or_columns_void_the_record():
    entries = recorded()
    assert lineage.compacted(chain(), entries, TOKENS, {}, COLS) == {("CN", D[3]): (D[0],)}
    assert lineage.compacted(chain(), entries, TOKENS, {}, [*COLS[:2], "w", *COLS[2:]]) == {}
    other = ChainState.build(
        replace(GROUPED, merge_engine="first-row"),
        [("CN", D[0]), ("CN", D[3])],
        [("CN", d) for d in D[1:]],
        {"dt": "string"},
    )
    assert lineage.compacted(other, entries, TOKENS, {}, COLS) == {}


def test_a_delta_write_voids_the_compactions_at_or_after_it_before_its_publish():
    state = ChainState.build(
        GROUPED,
        [(g, d) for g in ("CN", "US") for d in (D[0], D[2], D[4])],
        [(g, d) for g in ("CN", "US") for d in D[1:]],
        {"dt": "string"},
    )
    writes = [state.plan_read((g,), (d,), False) for g in ("CN", "US") for d in (D[2], D[4])]
    entries = lineage.record(state, {}, writes, TOKENS, COLS)
    assert len(entries) == 4
    # a new newest day: nothing to void (no statement)
    assert lineage.voided_by_deltas(state, entries, [("CN", "20250806")]) is None
    # CN's day 04 rewritten: CN's compaction of 05 read it; 03 and US's did not
    assert sorted(lineage.voided_by_deltas(state, entries, [("CN", D[3])])) == [
        "region=CN/dt=20250803",
        "region=US/dt=20250803",
        "region=US/dt=20250805",
    ]
    # a delta at the compacted day itself
    assert "region=US/dt=20250803" not in lineage.voided_by_deltas(state, entries, [("US", D[2])])
