"""The cumulative delta under random histories through real dbt (docs/design.md#cumulative-delta),
with crashes: two models over one source, `t` with the cumulative delta and `m` merged on read
only, take the same random sequence of operations (delta days written, rewritten and
backfilled, snapshots written by the model, compactions with and without overwrite, delta
partitions dropped, expiration), for both ways of building a day (ENGINES). Some operations on
`t` stop at a failpoint first: right after the crash every day of `t` reads, through the view
and through chain_read, as `m` before or as `m` after the operation, and after the rerun exactly
as `m` after it. After every step every day read through the view equals `m` row for row, and so
does every day read through chain_read. Every kind of operation comes at least once (`plan`), in
an order the seed draws. Once the history is built, chain_changes and chain_history over random
ranges of its days (docs/design.md#history-by-business-day) equal what the full states of those days give, on both models."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import history_expected as expected
import pytest
from helpers import chain_reads, reads_as, state

MODEL = """
{{{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
          sequence_field='seq', rowkind_field='op', chain_partition={{'dt': var('dt')}},{engine}
          chain_branch=var('branch', none),
          partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
          partition_expiration_time='3650 d', cumulative_delta={on},
          chain_store_changes={on}) }}}}
select id, v, op, seq, dt from {{{{ target.schema }}}}.changes where dt = '{{{{ var("dt") }}}}'
"""
DAYS = [f"202509{d:02d}" for d in range(1, 11)]
COLS = "id, v, seq"
# the steps of a run, of a compaction, and of the cumulative delta's upkeep around a write
RUN_POINTS = ["run.staged", "publish.first", "publish.done", "cumulative.unserved", "run.view"]
RUN_POINTS += ["cumulative.built"]
COMPACT_POINTS = ["compact.staged", "publish.done", "cumulative.unserved", "cumulative.built"]


class Source:
    """The `changes` table: random rows per day, never the same (key, seq) twice in one day
    (a run refuses that). Sequences grow by day, but a day's range overlaps the two before it:
    some days follow their anchor entirely (built without reading it), others have late rows."""

    def __init__(self, p, rng: random.Random, nulls: bool = False):
        self.p, self.rng, self.used, self.nulls = p, rng, set(), nulls

    def add(self, day: str, full: bool = False) -> None:
        rows = []
        if full:
            keys: Sequence[int] = range(1, 13)
        elif self.nulls:  # few keys, each updated often: late rows land between a key's values
            keys = self.rng.choices(range(1, 6), k=self.rng.randint(2, 5))
        else:
            keys = self.rng.sample(range(1, 15), self.rng.randint(1, 4))
        for key in keys:
            # one draw of 1-60 as before, so the seed gives the same operations
            seq = 10 * DAYS.index(day) + self.rng.randint(1, 60) % 25 + 1
            if (day, key, seq) in self.used:
                continue
            self.used.add((day, key, seq))
            kinds = ["+I", "+U", "+U", "-U", "-D"] + ["+U"] * 3 * self.nulls
            op = "+I" if full else self.rng.choice(kinds)
            v = f"'v{key}_{seq}_{day[-2:]}'"
            if self.nulls and not full and self.rng.random() < 0.5:
                v = "NULL"  # a partial update: the key keeps its earlier value
            rows.append(f"({key}, {v}, '{op}', {seq}, '{day}')")
        if rows:
            self.p.spark.sql(f"INSERT INTO {self.p.schema}.changes VALUES {', '.join(rows)}")


# the kinds of operations a history takes after its first day, each at least once: two new
# days first (the second skips a day, so that a backfill has a gap to fill), then the others in
# a random order with two more new days among them
KINDS = ["rewrite", "backfill", "snapshot", "compact", "drop", "new day", "new day"]


def plan(rng: random.Random) -> list[str]:
    rest = list(KINDS)
    rng.shuffle(rest)
    return ["new day", "new day, skipping one", *rest]


def operation(
    rng: random.Random, kind: str, written: list[str], deltas: list[str]
) -> tuple[str, dict]:
    """An operation of `kind` over the days written so far (`written`) and the days with a
    delta partition (`deltas`); a new day when there is no delta to act on."""
    later = [d for d in DAYS if d > max(written)]
    if kind.startswith("new day") or not deltas:
        skip = kind.endswith("skipping one") and len(later) > 1
        return ("run", {"dt": later[1] if skip else later[0] if later else rng.choice(DAYS[1:])})
    if kind == "backfill":
        gaps = [d for d in DAYS if DAYS[0] < d < max(written) and d not in written]
        assert gaps, written  # the second new day skipped one
        return ("run", {"dt": rng.choice(gaps)})
    if kind == "rewrite":
        return ("run", {"dt": rng.choice(deltas)})
    if kind == "snapshot":
        return ("run", {"dt": rng.choice(deltas), "branch": "snapshot"})
    if kind == "compact":
        args = {"partition": {"dt": rng.choice(deltas)}}
        return ("compact_chain", {**args, "overwrite": rng.random() < 0.5})
    assert kind == "drop", kind
    return ("drop_chain_partition", {"partition": {"dt": rng.choice(deltas)}, "branch": "delta"})


# a project macro: maintenance operations on several models in one run-operation, each call's
# operation on every model in turn
ON_MODELS = """
{% macro on_models(models, op, calls) %}
  {% for args in calls %}{% for model in models %}
    {% if op == 'compact_chain' %}{% do compact_chain(model=model, **args) %}
    {% elif op == 'drop_chain_partition' %}{% do drop_chain_partition(model=model, **args) %}
    {% elif op == 'expire_chain' %}{% do expire_chain(model=model, **args) %}
    {% else %}{% do exceptions.raise_compiler_error('no operation ' ~ op) %}{% endif %}
  {% endfor %}{% endfor %}
{% endmacro %}
"""


def apply(p, models: Sequence[str], op: tuple[str, dict], expect_ok: bool = True) -> None:
    """`op` on each of `models` (in this order), in one dbt invocation."""
    name, args = op
    if name == "run":
        p.dbt("run", "--select", *models, vars=args, expect_ok=expect_ok)
    elif len(models) == 1:
        p.run_op(name, {"model": models[0], **args}, expect_ok=expect_ok)
    else:
        p.file("macros/on_models.sql", ON_MODELS)
        calls = {"models": list(models), "op": name, "calls": [args]}
        p.run_op("on_models", calls, expect_ok=expect_ok)


def crash(p, op: tuple[str, dict], point: str, monkeypatch) -> bool:
    """`op` on `t` stopped at `point`; False when the operation never reaches that step (it
    then ran to its end)."""
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", point)
    try:
        apply(p, ["t"], op, expect_ok=False)
        return True
    except AssertionError as e:
        assert "unexpectedly succeeded" in str(e)
        return False
    finally:
        monkeypatch.delenv("CHAINTABLE_FAILPOINT")


# the engines' two ways of building a day (cumulative.incremental): deduplicate builds it from
# the previous day's cumulative delta plus the day's delta, partial-update with a sequence field
# (rows that arrive late change which value wins) from its anchor and every delta; both merge
# the anchor's rows in (cumulative.needs_anchor), and only deduplicate may leave it out
ENGINES = {
    "deduplicate": "",
    "partial-update": "\n          merge_engine='partial-update', "
    "partial_update_remove_record_on_delete=true,",
}


def ranges_sql(macro: str, model: str, ranges: list[tuple[str, str]], extra: str) -> str:
    """`macro` over each range of `model`, one query, a row's range first."""
    return " union all ".join(
        f"select '{a}-{b}' as __range, id, v, op, seq, dt, {extra} "
        f"from {{{{ {macro}(ref('{model}'), {{'dt': '{a}'}}, 'dt={b}') }}}} __r{i}"
        for i, (a, b) in enumerate(ranges)
    )


def read_ranges(p, queries: dict[str, str], day: str) -> dict[str, dict[str, list[tuple]]]:
    """{analysis: {range: rows}} of Jinja queries, compiled by one dbt invocation."""
    for name, sql in queries.items():
        p.file(f"analyses/{name}.sql", sql)
    p.dbt("compile", "--select", *queries, vars={"dt": day})
    out: dict[str, dict[str, list[tuple]]] = {}
    for name in queries:
        sql = p.root / "target" / "compiled" / "chain_test" / "analyses" / f"{name}.sql"
        rows = out.setdefault(name, {})
        for row in p.spark.sql(sql.read_text()).collect():
            rows.setdefault(row[0], []).append(tuple(row)[1:])
    return out


def history_is_the_full_states(p, rng: random.Random, models: Sequence[str]) -> None:
    """For each of `models`: chain_changes over random pairs of published days (and for `t`
    the last three pairs of consecutive days, which read the changes its runs stored) and
    chain_history over a random range (docs/design.md#history-by-business-day) equal a full diff of the days' states read
    through the view and the versions `dbt snapshot` records from them
    (tests/functional/history_expected.py). Every model's ranges compile in one invocation."""
    queries, draws = {}, []
    for model in models:
        parts = set(p.partitions(f"{model}__snapshot")) | set(p.partitions(f"{model}__delta"))
        days = sorted(part.split("=")[1] for part in parts)
        pairs = sorted({tuple(sorted(rng.sample(days, 2))) for _ in range(3)})
        if model == "t":  # where the changes its runs stored are read
            pairs = sorted(set(pairs) | set(list(itertools.pairwise(days))[-3:]))
        start = days[rng.randrange(len(days) - 2)]
        extra = "ct__change, ct__before"
        queries[f"range_changes_{model}"] = ranges_sql("chain_changes", model, pairs, extra)
        history = ranges_sql("chain_history", model, [(start, days[-1])], "ct__to_dt")
        queries[f"range_history_{model}"] = history
        draws.append((model, days, pairs, start))
    got = read_ranges(p, queries, max(days[-1] for _, days, _, _ in draws))
    for model, days, pairs, start in draws:
        states: dict[str, dict] = {d: {} for d in days}
        for r in p.spark.sql(f"select dt, id, v, op, seq from {p.schema}.{model}").collect():
            states[r[0]][r[1]] = tuple(r)[1:]
        changes, versions = got[f"range_changes_{model}"], got[f"range_history_{model}"]
        for a, b in pairs:
            want = expected.changes(states[a], states[b], a, b)
            assert expected.ordered(changes.get(f"{a}-{b}", [])) == want, (model, a, b)
        want = expected.versions(states, [d for d in days if d >= start])
        assert expected.ordered(versions.get(f"{start}-{days[-1]}", [])) == want, (model, start)
        assert want and any(changes.values()), (model, pairs, start)
    # t stores its days' changes: some consecutive days read them, m has none
    compiled = p.root / "target" / "compiled" / "chain_test" / "analyses"
    assert f"{p.schema}.t__changes" in (compiled / "range_changes_t.sql").read_text()
    assert "__changes" not in (compiled / "range_changes_m.sql").read_text()


@pytest.mark.parametrize("seed,engine", [(7, "deduplicate"), (15, "partial-update")])
def test_random_histories_with_crashes_read_as_merge_on_read(project, monkeypatch, seed, engine):
    p, rng = project, random.Random(seed)
    p.spark.sql(
        f"CREATE TABLE {p.schema}.changes (id int, v string, op string, seq int, dt string) "
        "USING parquet"
    )
    source = Source(p, rng, nulls=engine == "partial-update")
    source.add(DAYS[0], full=True)
    p.model("t", MODEL.format(on="true", engine=ENGINES[engine]))
    p.model("m", MODEL.format(on="false", engine=ENGINES[engine]))
    apply(p, ["t", "m"], ("run", {"dt": DAYS[0]}))
    written, crashes, anchorless = [DAYS[0]], 0, 0
    after = state(p, "m", COLS)  # m's state before each step: as the step before left it
    kinds = plan(rng)
    for step, kind in enumerate(kinds):
        deltas = sorted(k.split("=")[1] for k in p.partitions("m__delta"))
        op = operation(rng, kind, written, deltas)
        if op[0] == "run":
            source.add(op[1]["dt"])
        before = after
        points = RUN_POINTS if op[0] == "run" else COMPACT_POINTS
        point = rng.choice(points) if op[0] != "drop_chain_partition" and step % 2 else None
        if point and not crash(p, op, point, monkeypatch):
            point = None  # ran to its end: applied below again, as a rerun
        if point:
            crashed = state(p, "t", COLS)
            days = [part.split("=")[1] for part in crashed]
            crashed_reads = chain_reads(p, "t", days, COLS)
        # m's operation and t's (its rerun after a crash) in one invocation: m, merged on read
        # alone, logs no cumulative build
        apply(p, ["m", "t"], op)
        after = state(p, "m", COLS)
        if point:
            crashes += 1
            for part, rows in crashed.items():
                # a day published but not yet in the view reads as a day of neither branch:
                # no rows (the view's answer before the run)
                answers = (before.get(part, []), after.get(part, []))
                assert rows in answers, (step, op, point, part)
                read = crashed_reads[part.split("=")[1]]
                assert read in answers, (step, op, point, part)
        anchorless += "without reading the anchor" in p.log_text()
        assert state(p, "t", COLS) == after, (step, op, point)
        reads_as(p, "t", after, COLS)
        if op[0] == "run" and op[1]["dt"] not in written:
            written.append(op[1]["dt"])
    assert crashes >= 2
    # t reads days the cumulative delta serves, m merges every day on read
    history_is_the_full_states(p, rng, ("t", "m"))
    assert anchorless >= 1 if engine == "deduplicate" else anchorless == 0
    # expiration (every day older than 3650 days before `now`, as far as chains allow), once
    # the snapshots that rewritten deltas left stale are compacted again (until then
    # expiration keeps every day)
    p.file("macros/on_models.sql", ON_MODELS)
    snapshots = sorted(k.split("=")[1] for k in p.partitions("m__snapshot"))
    calls = [{"partition": {"dt": day}, "overwrite": True} for day in snapshots]
    p.run_op("on_models", {"models": ["t", "m"], "op": "compact_chain", "calls": calls})
    before = state(p, "m", COLS)
    assert state(p, "t", COLS) == before
    apply(p, ["t", "m"], ("expire_chain", {"now": "2045-01-01 00:00:00"}))
    expired = state(p, "m", COLS)
    assert state(p, "t", COLS) == expired
    assert len(expired) < len(before)
