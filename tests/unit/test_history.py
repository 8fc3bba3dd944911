"""History by business day (docs/design.md#history-by-business-day, history/): which days a range reads, which groups are read
for the changed keys only, the shape of chain_changes' and chain_history's SQL, and the errors.
The rows they give are checked on real Spark in tests/functional/test_history.py."""

import json
import re

import pytest
from test_view_layout import GROUPED, HOURLY  # region + dt; dt + hour

from dbt.adapters.chaintable.base.partitions import ChainPlanError
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan
from dbt.adapters.chaintable.history import sql
from dbt.adapters.chaintable.history.plan import plan_history
from dbt.adapters.chaintable.read.render import Renderer

COLS = ["id", "v", "op", "seq", "region", "dt"]
TYPES = {"id": "int", "v": "string", "op": "string", "seq": "int", "region": "string"}


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def state():
    """CN: snapshot 01, deltas 02..05, a compaction at 04. US: snapshot 01, deltas 02..05."""
    days = ["20250801", "20250802", "20250803", "20250804", "20250805"]
    snaps = [("CN", days[0]), ("CN", days[3]), ("US", days[0])]
    deltas = [(g, d) for g in ("CN", "US") for d in days[1:]]
    return ChainState.build(GROUPED, snaps, deltas, {"dt": "string"})


def renderer(opts=GROUPED, cols=COLS, types=TYPES):
    return Renderer(opts, cols, types, "s.t__snapshot", "s.t__delta", "s.t__cumulative")


def test_a_group_without_a_snapshot_in_the_range_is_read_for_its_changed_keys_only():
    plan = plan_history(state(), {"dt": "20250802"}, {"dt": "20250803"}, every_day=False)
    assert plan.days == (("20250802",), ("20250803",))
    assert plan.incremental == (("CN",), ("US",))
    assert plan.full == ()
    assert plan.candidates == (("CN", "20250803"), ("US", "20250803"))


def test_a_snapshot_inside_the_range_reads_that_group_in_full():
    plan = plan_history(state(), "dt=20250802", {"dt": "20250805"})
    assert plan.days == tuple((d,) for d in ("20250802", "20250803", "20250804", "20250805"))
    assert plan.incremental == (("US",),)
    assert plan.full == (("CN",),)
    assert plan.candidates == tuple(("US", d) for d in ("20250803", "20250804", "20250805"))
    # starting on the snapshot day itself: every later day reads from it (its anchor)
    plan = plan_history(state(), {"dt": "20250804"}, {"dt": "20250805"})
    assert plan.incremental == (("CN",), ("US",))
    assert plan.candidates == (("CN", "20250805"), ("US", "20250805"))


def test_group_keys_in_a_day_narrow_the_groups():
    plan = plan_history(state(), {"dt": "20250802", "region": "US"}, {"dt": "20250805"})
    assert plan.incremental == (("US",),) and plan.full == ()
    assert all(p.group == ("US",) for plans in plan.reads for p in plans)


def test_a_group_that_starts_inside_the_range_is_read_in_full():
    s = ChainState.build(
        GROUPED,
        [("CN", "20250801")],
        [("CN", "20250802"), ("CN", "20250803"), ("EU", "20250803")],
        {"dt": "string"},
    )
    plan = plan_history(s, {"dt": "20250801"}, {"dt": "20250803"})
    assert plan.incremental == (("CN",),) and plan.full == (("EU",),)
    assert [p.group for p in plan.reads[0]] == [("CN",)]


@pytest.mark.parametrize(
    "start, end, message",
    [
        ({"dt": "20250803"}, {"dt": "20250802"}, "from (dt=20250803) must be a day before to"),
        ({"dt": "20250803"}, {"dt": "20250803"}, "must be a day before to"),
        ({"dt": "20250731"}, {"dt": "20250803"}, "from day dt=20250731 is not a published day"),
        ({"dt": "20250801"}, {"dt": "20250809"}, "to day dt=20250809 is not a published day"),
        ({"dt": "20250801", "region": "EU"}, {"dt": "20250803"}, "names no group"),
        ({"region": "CN"}, {"dt": "20250803"}, "chain key(s) ['dt'] are not given"),
        ({"day": "20250801"}, {"dt": "20250803"}, "not partition columns"),
    ],
)
def test_bad_days_are_refused(start, end, message):
    with pytest.raises(ChainPlanError, match=re.escape(message)):
        plan_history(state(), start, end)


def test_a_day_before_the_history_expiration_kept_is_refused():
    history = {("CN",): ("20250804",)}
    with pytest.raises(ChainPlanError, match="from day dt=20250801 of region=CN was expired"):
        plan_history(state(), {"dt": "20250801"}, {"dt": "20250805"}, history)
    plan_history(state(), {"dt": "20250804"}, {"dt": "20250805"}, history)


def test_changes_join_the_candidate_keys_states_on_both_days():
    r = renderer()
    plan = plan_history(state(), {"dt": "20250802"}, {"dt": "20250803"}, every_day=False)
    text = flat(sql.changes(r, plan, {}))
    keys = (
        "SELECT DISTINCT `id`, `region` FROM s.t__delta WHERE "
        "(`region` IN ('CN', 'US') AND `dt` = '20250803')"
    )
    assert text.count(keys) == 2  # the states of both days are read for those keys only
    assert text.count("LEFT SEMI JOIN (SELECT DISTINCT `id`, `region` FROM s.t__delta WHERE") == 2
    assert text.startswith(
        "SELECT CASE WHEN __t.__ct_on THEN __t.`id` ELSE __f.`id` END AS `id`, "
        "CASE WHEN __t.__ct_on THEN __t.`v` ELSE __f.`v` END AS `v`, "
    )
    assert "'20250803' AS `dt`, CASE WHEN __f.__ct_on IS NULL THEN 'insert'" in text
    assert (
        "CASE WHEN __f.__ct_on THEN named_struct('id', __f.`id`, 'v', __f.`v`, 'op', __f.`op`, "
        "'seq', __f.`seq`, 'region', __f.`region`, 'dt', __f.`dt`) END AS ct__before"
    ) in text
    assert "ON __t.`id` = __f.`id` AND __t.`region` = __f.`region`" in text
    assert text.endswith(
        "WHERE __t.__ct_on IS NULL OR __f.__ct_on IS NULL OR NOT "
        "(__t.`v` <=> __f.`v` AND __t.`op` <=> __f.`op` AND __t.`seq` <=> __f.`seq`)"
    )


def test_changes_read_a_served_to_days_candidates_from_its_cumulative_delta():
    r = renderer()
    plan = plan_history(state(), {"dt": "20250802"}, {"dt": "20250803"}, every_day=False)
    text = flat(sql.changes(r, plan, {("CN", "20250802"): "s2", ("CN", "20250803"): "s3"}))
    to_side, from_side = text.split(" FULL OUTER JOIN ")
    snapshot = "FROM s.t__snapshot WHERE (`region` = '{}' AND `dt` = '20250801')"
    # on 03, CN's changed keys come from its C partition's live rows
    live = (
        "SELECT `id`, `v`, `op`, `seq`, `region`, '20250803' AS `dt` FROM (SELECT __hs.* FROM "
        "(SELECT `id`, `v`, `op`, `seq`, `region`, `dt` FROM (SELECT `id`, `v`, `op`, `seq`, "
        "`region`, `dt` FROM s.t__cumulative WHERE ((`region` = 'CN' AND `dt` = '20250803')) "
        "AND `ct__stamp` IN ('s3')) __c WHERE NOT coalesce(`op` IN ('-U', '-D'), false)) __hs "
        "LEFT SEMI JOIN (SELECT DISTINCT `id`, `region` FROM s.t__delta WHERE (`region` IN "
        "('CN', 'US') AND `dt` = '20250803')) __hk"
    )
    # and from its anchor only the rows of CN's changed keys that C does not hold (an anchor
    # row that won): a small set, empty when no anchor row won, and Spark skips the scan
    anchor = (
        "SELECT `id`, `v`, `op`, `seq`, `region`, '20250803' AS `dt` FROM (SELECT "
        "__a.* FROM (SELECT `id`, `v`, `op`, `seq`, `region`, `dt` "
        + snapshot.format("CN")
        + ") __a LEFT SEMI JOIN (SELECT __hs.* FROM (SELECT DISTINCT `id`, `region` FROM "
        "s.t__delta WHERE (`region` = 'CN' AND `dt` = '20250803')) __hs LEFT ANTI JOIN (SELECT "
        "`id`, `region` FROM s.t__cumulative WHERE ((`region` = 'CN' AND `dt` = '20250803')) "
        "AND `ct__stamp` IN ('s3')) __hk ON __hs.`id` = __hk.`id` AND __hs.`region` = "
        "__hk.`region`) __hm ON __a.`id` = __hm.`id` AND __a.`region` = __hm.`region`) __m"
    )
    assert live in to_side and anchor in to_side
    assert to_side.count(snapshot.format("CN")) == 1 and "'s2'" not in to_side
    assert to_side.count(snapshot.format("US")) == 2  # US, not served, merges on read
    # on 02, CN is read as a served day: its anchor without the keys C holds, and C's rows
    assert from_side.count(snapshot.format("CN")) == 1 and "'s3'" not in from_side
    assert "`dt` = '20250802')) AND `ct__stamp` IN ('s2')) __kk) __k ON" in from_side


def test_changes_across_a_compaction_compare_that_groups_full_states():
    r = renderer()
    plan = plan_history(state(), {"dt": "20250803"}, {"dt": "20250805"}, every_day=False)
    text = flat(sql.changes(r, plan, {}))
    # US: candidates only; CN: its snapshot 04 read whole against its merged 03
    assert text.count("LEFT SEMI JOIN (SELECT DISTINCT `id`, `region` FROM s.t__delta WHERE") == 2
    assert "FROM s.t__snapshot WHERE (`region` = 'CN' AND `dt` = '20250804')" in text
    assert "(`region` = 'US' AND `dt` IN ('20250804', '20250805'))" in text


def test_changes_without_any_delta_in_the_range_read_no_state_of_incremental_groups():
    s = ChainState.build(
        HOURLY,
        [("20250801", "0"), ("20250801", "1")],
        [],
        {"dt": "string", "hour": "int"},
    )
    r = renderer(HOURLY, ["id", "v", "dt", "hour"], {"id": "int", "v": "string", "hour": "int"})
    plan = plan_history(s, {"dt": "20250801", "hour": "0"}, "dt=20250801,hour=1", every_day=False)
    assert plan.full == ((),) and plan.candidates == ()
    text = flat(sql.changes(r, plan, {}))
    assert "'20250801' AS `dt`, CAST('1' AS int) AS `hour`" in text
    assert "FROM s.t__snapshot WHERE (`dt` = '20250801' AND `hour` = CAST('1' AS int))" in text


def test_history_reads_each_segment_in_full_on_its_first_day_and_touched_keys_after():
    plan = plan_history(state(), {"dt": "20250802"}, {"dt": "20250805"})
    # CN reads from snapshot 01 on days 02-03 and from snapshot 04 on 04-05; US from 01 on all
    assert [(s.group, s.start, s.end, s.candidates) for s in plan.segments] == [
        (("CN",), 0, 1, (("CN", "20250803"),)),
        (("CN",), 2, 3, (("CN", "20250805"),)),
        (("US",), 0, 3, (("US", "20250803"), ("US", "20250804"), ("US", "20250805"))),
    ]
    text = flat(sql.history(renderer(), plan, {}))
    for i in range(4):
        assert f"{i} AS __ct_i FROM" in text
    # a segment's first day: every key, held to the segment's end unless a delta touches it
    touched = (
        "LEFT OUTER JOIN (SELECT DISTINCT `id`, `region`, true AS __ct_touched FROM s.t__delta"
    )
    assert text.count(touched) == 3
    assert "CASE WHEN __hk.__ct_touched THEN 0 ELSE 1 END AS __ct_upto" in text
    assert "CASE WHEN __hk.__ct_touched THEN 0 ELSE 3 END AS __ct_upto" in text
    assert (
        "CASE WHEN __hk.__ct_touched THEN 2 ELSE 3 END AS __ct_upto FROM (SELECT `id`, `v`, "
        "`op`, `seq`, `region`, `dt` FROM s.t__snapshot WHERE (`region` = 'CN' AND `dt` = "
        "'20250804'))"
    ) in text
    # the other days: the touched keys only
    assert text.count("LEFT SEMI JOIN (SELECT DISTINCT `id`, `region` FROM s.t__delta") == 3
    window = "(PARTITION BY `id`, `region` ORDER BY __ct_i)"
    assert (
        f"CASE WHEN lag(__ct_upto) OVER {window} = __ct_i - 1 AND lag(`v`) OVER {window} <=> `v` "
        f"AND lag(`op`) OVER {window} <=> `op` AND lag(`seq`) OVER {window} <=> `seq` "
        "THEN 0 ELSE 1 END AS __ct_new"
    ) in text
    assert "max(__ct_upto) OVER (PARTITION BY `id`, `region`, `__ct_v`) AS __ct_last" in text
    assert (
        "CASE __ct_last WHEN 0 THEN '20250803' WHEN 1 THEN '20250804' WHEN 2 THEN '20250805' "
        "ELSE CAST(NULL AS string) END AS `ct__to_dt`"
    ) in text
    assert text.endswith("WHERE __ct_new = 1")


def test_a_day_a_group_has_no_partition_at_ends_its_segment():
    s = ChainState.build(
        GROUPED,
        [("CN", "20250801")],
        [("CN", "20250802"), ("CN", "20250803"), ("US", "20250801"), ("US", "20250803")],
        {"dt": "string"},
    )
    plan = plan_history(s, {"dt": "20250801"}, {"dt": "20250803"})
    assert [(s.group, s.start, s.end) for s in plan.segments] == [
        (("CN",), 0, 2),
        (("US",), 0, 0),
        (("US",), 2, 2),
    ]
    assert plan.incremental == (("CN",),) and plan.full == (("US",),)


def test_history_of_hourly_chain_keys_ends_each_key():
    s = ChainState.build(
        HOURLY,
        [("20250801", "0")],
        [("20250801", "1"), ("20250801", "2")],
        {"dt": "string", "hour": "int"},
    )
    r = renderer(HOURLY, ["id", "v", "dt", "hour"], {"id": "int", "v": "string", "hour": "int"})
    text = flat(sql.history(r, plan_history(s, "dt=20250801,hour=0", "dt=20250801,hour=2"), {}))
    assert "CASE __ct_last WHEN 0 THEN '20250801' WHEN 1 THEN '20250801' ELSE" in text
    assert (
        "CASE __ct_last WHEN 0 THEN CAST('1' AS int) WHEN 1 THEN CAST('2' AS int) "
        "ELSE CAST(NULL AS int) END AS `ct__to_hour`"
    ) in text
    assert "SELECT DISTINCT `id` FROM s.t__delta" in text


def test_the_facade_reads_the_catalog_only_and_serves_days_from_the_cumulative_delta():
    from tests.unit.test_group_statements import daily_runs

    (conns, adapter, rel), _ = daily_runs(2, runs=2)  # deltas 02..06, C built for 05 and 06
    conns.statements.clear()
    text = flat(adapter.chain_changes_sql(rel, {"dt": "20250104"}, "dt=20250106"))
    assert all(s.lstrip().startswith(("SHOW", "DESCRIBE")) for s in conns.statements)
    assert "FROM s.t__cumulative WHERE" in text  # day 06 is served
    assert "SELECT DISTINCT `id`, `region` FROM s.t__delta WHERE" in text
    history = flat(adapter.chain_history_sql(rel, "dt=20250104", {"dt": "20250106"}))
    assert "WHEN 0 THEN '20250105' WHEN 1 THEN '20250106' ELSE" in history
    with pytest.raises(ChainPlanError, match=r"chain_history s.t: to day dt=20250107 is not a"):
        adapter.chain_history_sql(rel, "dt=20250104", "dt=20250107")
    other = adapter.Relation.create(schema="s", identifier="src", type="view")
    with pytest.raises(ChainConfigError, match=re.escape("'s.src' is not a chain table")):
        adapter.chain_changes_sql(other, "dt=20250104", "dt=20250106")


# ---- the plan's reasoning against brute force, on random chains --------------------------------
def _random_chain(rng):
    """Groups CN and US over days 01..08: random snapshot partitions (full writes of any
    content, or compactions: a day's merged read, where the day has a delta) and deltas (rows
    of keys 1..6: a value or None, a delete), as the catalog, the rows of each partition and
    the compactions ({group + chain: anchor chain}, as chain/lineage.py gives them)."""
    days = [f"202508{d:02d}" for d in range(1, 9)]
    snaps, deltas, rows, compacted = [], [], {}, {}
    for g in ("CN", "US"):
        anchor, since = None, []  # the group's newest snapshot, its deltas after it
        for i, d in enumerate(days):
            if i > 0 and rng.random() < 0.85:
                deltas.append((g, d))
                rows[("delta", g, d)] = {
                    k: rng.choice([None, f"d{d}{k}", "same"]) for k in rng.sample(range(1, 7), 2)
                }
                since.append((d,))
            if i == 0 or rng.random() < 0.25:
                snaps.append((g, d))
                if since and since[-1] == (d,) and rng.random() < 0.6:
                    plan = ReadPlan((g,), (d,), False, anchor, tuple(since))
                    rows[("snapshot", g, d)] = _state_of(plan, rows)
                    compacted[(g, d)] = anchor
                else:
                    rows[("snapshot", g, d)] = {
                        k: f"s{d}{k}" for k in range(1, 7) if rng.random() < 0.6
                    }
                anchor, since = (d,), []
    return ChainState.build(GROUPED, snaps, deltas, {"dt": "string"}), rows, days, compacted


def _state_of(plan, rows):
    """A day's full state by the read rules, the merge being 'the last row wins, None deletes'."""
    if plan is None:
        return {}
    if plan.from_snapshot:
        return dict(rows[("snapshot", *plan.group, *plan.chain)])
    out = dict(rows[("snapshot", *plan.group, *plan.anchor)]) if plan.anchor else {}
    for d in plan.deltas:
        for k, v in rows[("delta", *plan.group, *d)].items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
    return out


def _versions(states):
    out = set()
    for key in {k for s in states for k in s}:
        current, since = None, None
        for i, s in enumerate(states):
            if s.get(key) != current:
                if current is not None:
                    out.add((key, current, since, i))
                current, since = s.get(key), i
        if current is not None:
            out.add((key, current, since, None))
    return out


def _planned_versions(plan, state_on, rows):
    """What history/sql.py computes from the plan's reads: per day the rows of each segment's
    first day (held to the segment's end unless touched) and the touched keys of the others."""
    n = len(plan.days) - 1
    stacked = {}  # (group, key) -> [(day, upto, value)]
    for seg in plan.segments:
        touched = {(seg.group, k) for c in seg.candidates for k in rows[("delta", *c)]}
        for i in range(seg.start, seg.end + 1):
            for k, v in state_on(seg.group, i).items():
                key = (seg.group, k)
                if i == seg.start:
                    upto = i if key in touched else seg.end
                elif key in touched:
                    upto = i
                else:
                    continue
                stacked.setdefault(key, []).append((i, upto, v))
    out = set()
    for key, rs in stacked.items():
        rs.sort()
        starts = [
            j
            for j, r in enumerate(rs)
            if j == 0 or not (rs[j - 1][1] == r[0] - 1 and rs[j - 1][2] == r[2])
        ]
        for a, b in zip(starts, [*starts[1:], len(rs)], strict=True):
            last = max(r[1] for r in rs[a:b])
            out.add((key, rs[a][2], rs[a][0], None if last == n else last + 1))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_versions_and_changes_from_the_plans_reads_equal_brute_force(seed):
    import random

    rng = random.Random(seed)
    s, rows, _, compacted = _random_chain(rng)
    days = sorted({p[1] for p in s.snapshots | s.deltas})
    start, end = sorted(rng.sample(range(len(days)), 2))
    plan = plan_history(s, {"dt": days[start]}, {"dt": days[end]}, compacted=compacted)
    by_day = [{p.group: p for p in plans} for plans in plan.reads]

    def state_on(group, i):
        return _state_of(by_day[i].get(group), rows)

    brute = {
        ((g, k), v, a, b)
        for g in (("CN",), ("US",))
        for (k, v, a, b) in _versions([state_on(g, i) for i in range(len(plan.days))])
    }
    assert _planned_versions(plan, state_on, rows) == brute

    changes = plan_history(
        s, {"dt": days[start]}, {"dt": days[end]}, every_day=False, compacted=compacted
    )
    first = {p.group: p for p in changes.reads[0]}
    last = {p.group: p for p in changes.reads[1]}
    touched = {(c[:1], k) for c in changes.candidates for k in rows[("delta", *c)]}
    for g in (("CN",), ("US",)):
        before, after = _state_of(first.get(g), rows), _state_of(last.get(g), rows)
        diff = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
        if g in changes.incremental:
            assert {k for k in diff if (g, k) not in touched} == set()


def test_the_macros_return_the_facades_sql_as_a_subquery(monkeypatch):
    """chain_changes and chain_history as dbt calls them (its `return` ends the macro it is in
    with a value), on a stand-in adapter."""
    from pathlib import Path
    from types import SimpleNamespace

    import jinja2

    class Returned(Exception):
        pass

    def returned(value):
        raise Returned(value)

    invoke = jinja2.runtime.Macro._invoke

    def invoke_returning(self, arguments, autoescape):
        try:
            return invoke(self, arguments, autoescape)
        except Returned as r:
            return r.args[0]

    monkeypatch.setattr(jinja2.runtime.Macro, "_invoke", invoke_returning)
    calls = []
    adapter = SimpleNamespace(
        chain_changes_sql=lambda *a: calls.append(("changes", *a)) or "SELECT 1",
        chain_history_sql=lambda *a: calls.append(("history", *a)) or "SELECT 2",
    )
    path = Path(__file__).parents[2] / "dbt/include/chaintable/macros/operations"
    env = jinja2.Environment(extensions=["jinja2.ext.do"])
    env.globals.update({"return": returned, "adapter": adapter, "execute": True})
    module = env.from_string((path / "chain_operations.sql").read_text()).module
    rel = SimpleNamespace(name="rel")
    assert module.chain_changes(rel, {"dt": "20250801"}, "dt=20250802") == "(SELECT 1)"
    assert module.chain_history(rel, {"dt": "20250801"}, "dt=20250802") == "(SELECT 2)"
    assert calls == [
        ("changes", rel, {"dt": "20250801"}, "dt=20250802"),
        ("history", rel, {"dt": "20250801"}, "dt=20250802"),
    ]


def test_a_range_across_a_compaction_reads_the_changed_keys_only():
    """compact_chain records what it merged (chain/lineage.py); chain_changes then reads the
    group across that snapshot for its changed keys, and in full once the record is void."""
    from test_golden_sql import setup

    conns, adapter, rel = setup(recent=7)
    assert adapter.chain_compact(rel, {"dt": "20250104"}) is True
    props = conns.tables["s.t__snapshot"].props
    assert json.loads(props["chaintable.compacted"])["region=CN/dt=20250104"][1] == (
        "region=CN/dt=20250101"
    )
    keys = (
        "SELECT DISTINCT `id`, `region` FROM s.t__delta WHERE (`region` = 'CN' AND `dt` IN "
        "('20250104', '20250105'))"
    )
    # day 05 read whole: its anchor 04 without the keys its cumulative delta holds
    full = "FROM s.t__snapshot WHERE (`region` = 'CN' AND `dt` = '20250104')) __a LEFT ANTI JOIN"
    after = flat(adapter.chain_changes_sql(rel, {"dt": "20250103"}, {"dt": "20250105"}))
    assert keys in after and full not in after
    # day 04 written again (a new token): a full write, which nothing is known to equal
    tokens = json.loads(props["chaintable.snapshot-generations"])
    props["chaintable.snapshot-generations"] = json.dumps(
        {**tokens, "region=CN/dt=20250104": "another"}
    )
    void = flat(adapter.chain_changes_sql(rel, {"dt": "20250103"}, {"dt": "20250105"}))
    assert keys not in void and full in void
