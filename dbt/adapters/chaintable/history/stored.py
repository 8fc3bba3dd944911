"""Stored changes (model config chain_store_changes; docs/design.md, History by business day).

The run that writes a group's day D stores chain_changes from the group's day before (P, its
previous published day) to D in t__changes, in a partition of its own: the group, D, and
`<stamp of D's cumulative partition>.<a token of that store>`. chain_changes of a range whose
one delta of a group is D's reads that partition while the cumulative partition of the same
stamp serves D and no write voided it. The stamp names D's inputs (its anchor, its deltas, the
merge options): a day whose inputs change names gets another. A write in place (a day written
again, a backfill before D, a snapshot over one) keeps the names, and so does a day dropped and
written again, so before it publishes (or drops) it voids its groups from their first day on
(`chaintable.changes-void`, one entry a group, read with the chain's properties: no file goes
while a reader may read it), and the next store drops the void partitions. The state on P reads the same anchor and a subset of D's deltas, so neither state
changed since the store. Anything else reads the branches as before: the store only saves
reads, never decides what a read returns.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence

from dbt.adapters.base.relation import BaseRelation
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.keys import P_CHANGES_COLUMNS, P_CHANGES_VOID
from dbt.adapters.chaintable.base.partitions import ChainPlanError, Values, parse_partition_path
from dbt.adapters.chaintable.base.progress import Stopwatch
from dbt.adapters.chaintable.base.quoting import cols_sql, literal, q
from dbt.adapters.chaintable.base.runner import LeaseLostError, logger
from dbt.adapters.chaintable.chain.catalog import Catalog, Loaded
from dbt.adapters.chaintable.chain.lineage import compacted_of
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.chain.tables import CHANGES_SUFFIX, STAMP_COLUMN, ChainTables, name_of
from dbt.adapters.chaintable.cumulative.plan import served_days
from dbt.adapters.chaintable.history import sql
from dbt.adapters.chaintable.history.plan import HistoryPlan, plan_history
from dbt.adapters.chaintable.read.render import Renderer


def changes_table(tables: ChainTables) -> BaseRelation:
    """t__changes, beside the chain's other tables (chain/catalog.py)."""
    ident = name_of(tables.view) + CHANGES_SUFFIX
    return tables.view.incorporate(path={"identifier": ident}, type="table")


# ---- pure ---------------------------------------------------------------------------------
def columns_digest(columns: Sequence[tuple[str, str]]) -> str:
    """What t__changes was created for: the chain's columns and types, in table order."""
    text = ",".join(f"{c.lower()}:{t.lower()}" for c, t in columns)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def targets(
    state: ChainState, written: Sequence[Values], serving: Mapping[Values, str]
) -> dict[tuple[Values, Values], list[Values]]:
    """{(day before, day): groups} of the delta partitions `written` whose day the cumulative
    delta serves (`serving`: group + chain -> stamp) and whose group has a published day
    before it."""
    key, days = state.sort_key, state.chains()
    out: dict[tuple[Values, Values], list[Values]] = {}
    for part in sorted(set(written)):
        group, day = state.layout.split(part)
        before = [c for c in days.get(group, []) if key(c) < key(day)]
        if part in serving and before:
            out.setdefault((before[-1], day), []).append(group)
    return out


def stored_groups(
    plan: HistoryPlan, serving: Mapping[Values, str], stored: Collection[Values]
) -> dict[Values, str]:
    """{group: stored stamp} of the plan's groups whose changes t__changes holds (`stored`:
    its partitions no write voided, values + stored stamp): read incrementally, with `to`'s
    delta as their one delta in (from, to], `to` served by the cumulative partition the
    changes were stored under, and one such partition. Such a group has no published day in
    (from, to) but a compaction that equals its read (history/plan.py), so its state on
    `from` is its state on the day the changes started from."""
    to = plan.days[-1]
    found: dict[tuple[Values, str], list[str]] = {}
    for part in stored:
        found.setdefault((part[:-1], cumulative_stamp(part[-1])), []).append(part[-1])
    incremental = set(plan.incremental)
    out = {}
    for seg in plan.segments:
        part = seg.group + to
        stamp = serving.get(part)
        hits = found.get((part, stamp), []) if stamp is not None else []
        if seg.group in incremental and seg.candidates == (part,) and len(hits) == 1:
            out[seg.group] = hits[0]
    return out


def cumulative_stamp(stored: str) -> str:
    """The stamp of the cumulative partition a stored partition's stamp (`<stamp>.<token>`)
    was stored under."""
    return stored.split(".")[0]


def written_in_place(state: ChainState, written: Sequence[Values]) -> dict[Values, Values]:
    """{group: first day written} of the groups `written` (group + chain, any branch) writes
    in place: a day the group has, or one before a day it has. A new newest day is none."""
    key = state.sort_key
    last = {g: days[-1] for g, days in state.chains().items()}
    first: dict[Values, Values] = {}
    for part in written:
        g, c = state.layout.split(part)
        if g in last and key(c) <= key(last[g]) and (g not in first or key(c) < key(first[g])):
            first[g] = c
    return first


Void = dict[str, str]  # chaintable.changes-void: {group path: chain path of its first void day}


def with_void(state: ChainState, void: Mapping[str, str], first: Mapping[Values, Values]) -> Void:
    """`void` once the groups of `first` ({group: first day written in place}) are void from
    that day on too (each group keeps its earliest day: one entry a group, whatever the days)."""
    key, lay = state.sort_key, state.layout
    out = dict(void)
    for g, c in first.items():
        path = lay.group_path(g)
        if path not in out or key(c) < key(lay.parse_chain(out[path])):
            out[path] = lay.chain_path(c)
    return dict(sorted(out.items()))


def is_void(state: ChainState, void: Mapping[str, str], part: Values) -> bool:
    """Whether stored partition `part` (values + stored stamp) lies in a void range."""
    lay = state.layout
    g, c = lay.split(part[:-1])
    first = void.get(lay.group_path(g))
    return first is not None and state.sort_key(c) >= state.sort_key(lay.parse_chain(first))


def unused(
    listed: Collection[Values],
    cumulative: Collection[Values],
    void: Collection[Values],
    added: Collection[Values] = (),
) -> list[Values]:
    """The stored partitions (values + stored stamp) no read uses again: voided, a day that a
    store `added` one for since, or whose cumulative partition (values + stamp) is gone
    (renamed inputs, its day compacted or expired)."""
    kept, gone, fresh = set(cumulative), set(void), set(added)
    new = {a[:-1] for a in fresh}
    return sorted(
        p
        for p in listed
        if p not in fresh
        and (p in gone or p[:-1] in new or p[:-1] + (cumulative_stamp(p[-1]),) not in kept)
    )


# ---- SQL ----------------------------------------------------------------------------------
def _struct_type(r: Renderer) -> str:
    return "STRUCT<" + ", ".join(f"{q(c)}: {r.type_of(c)}" for c in r.columns) + ">"


def create_sql(r: Renderer, table: str) -> str:
    """t__changes: the data columns, the kind and the before image, then the partition
    columns and the stamp of the day's cumulative partition."""
    cols = [
        *((c, r.type_of(c)) for c in r.data_columns),
        (sql.CHANGE, "string"),
        (sql.BEFORE, _struct_type(r)),
        *((c, r.type_of(c)) for c in r.opts.partition_by),
        (STAMP_COLUMN, "string"),
    ]
    return S.create_table(table, cols, [*r.opts.partition_by, STAMP_COLUMN], {})


def insert_sql(r: Renderer, table: str, changes: str, stamps: Mapping[Values, str]) -> str:
    """The rows of `changes` (chain_changes of one range) into the partitions of their group,
    tagged with its stamp (`stamps`: group -> stamp)."""
    if r.opts.group_keys:
        cases = " ".join(
            f"WHEN {r.predicate(r.opts.group_keys, g)} THEN {literal(s)}"
            for g, s in sorted(stamps.items())
        )
        stamp = f"CASE {cases} END"
    else:
        (stamp,) = (literal(s) for s in stamps.values())
    parts = cols_sql([*r.opts.partition_by, STAMP_COLUMN])
    names = cols_sql([*r.data_columns, sql.CHANGE, sql.BEFORE, *r.opts.partition_by])
    return (
        f"INSERT OVERWRITE TABLE {table} PARTITION ({parts})\n"
        f"SELECT {names}, {stamp} AS {q(STAMP_COLUMN)} FROM ({changes}) __cs"
    )


def add_empty_sql(r: Renderer, table: str, parts: Sequence[Values]) -> str | None:
    """Partitions (values + stamp) a day without changes leaves out of the insert."""
    return S.add_empty_partitions(table, [*r.opts.partition_by, STAMP_COLUMN], parts)


def read_sql(r: Renderer, table: str, to: Values, stamps: Mapping[Values, str]) -> str:
    """The stored changes of day `to` of the groups of `stamps`, as chain_changes gives them."""
    parts = [g + to for g in stamps]
    listed = ", ".join(literal(s) for s in sorted(set(stamps.values())))
    return (
        f"SELECT {cols_sql(r.columns)}, {q(sql.CHANGE)}, {q(sql.BEFORE)} FROM {table} "
        f"WHERE ({r.partitions_predicate(parts)}) AND {q(STAMP_COLUMN)} IN ({listed})"
    )


# ---- I/O ----------------------------------------------------------------------------------
class ChangesStore:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.run = catalog.runner.run

    def listed(self, loaded: Loaded) -> list[Values]:
        """Every partition of t__changes (values + stored stamp)."""
        cols = [*loaded.opts.partition_by, STAMP_COLUMN]
        paths = self.catalog.partition_paths(changes_table(loaded.tables))
        return [parse_partition_path(p, cols) for p in paths]

    def stored(self, loaded: Loaded) -> set[Values] | None:
        """t__changes's partitions no write voided, None when the chain stores none."""
        if not (loaded.opts.store_changes and loaded.props.get(P_CHANGES_COLUMNS)):
            return None
        state, void = loaded.state(), _void(loaded)
        return {p for p in self.listed(loaded) if not is_void(state, void, p)}

    def changes_sql(self, loaded: Loaded, plan: HistoryPlan, serving: Mapping[Values, str]) -> str:
        """chain_changes of `plan`: the groups whose changes are stored read from t__changes,
        the others from the branches."""
        r = Renderer.of(loaded)
        stored = self.stored(loaded)
        stamps = stored_groups(plan, serving, stored) if stored else {}
        if not stamps:
            return sql.changes(r, plan, serving)
        parts = [read_sql(r, str(changes_table(loaded.tables)), plan.days[-1], stamps)]
        rest = plan.restricted([s.group for s in plan.segments if s.group not in stamps])
        if rest.segments:
            parts.append(sql.changes(r, rest, serving))
        return "\nUNION ALL\n".join(f"SELECT * FROM ({p}) __sc{i}" for i, p in enumerate(parts))

    def before_write(self, loaded: Loaded, written: Sequence[Values]) -> Loaded:
        """Before `written` (group + chain, any branch, or a partition about to be dropped)
        changes the catalog: the groups it writes in place are void from their first day on
        (chaintable.changes-void), read with the chain's properties. A new newest day voids
        nothing and costs nothing."""
        if not loaded.props.get(P_CHANGES_COLUMNS):
            return loaded
        state, before = loaded.state(), _void(loaded)
        void = with_void(state, before, written_in_place(state, written))
        if void == before:
            return loaded
        value = json.dumps(void, separators=(",", ":"))
        self.catalog.set_properties(loaded.tables.snapshot, {P_CHANGES_VOID: value})
        return loaded.with_props({P_CHANGES_VOID: value})

    def after_write(
        self, loaded: Loaded, written: Sequence[Values], check: Callable[[], None]
    ) -> None:
        """Store the changes of the days `written` (delta partitions just published, their
        cumulative delta built) and drop what no read uses; drop the table when the chain
        stores none. `check`: the writer's lease, checked before the void list is written.
        A failure is a warning: the write stays, and chain_changes reads the branches where
        nothing valid is stored."""
        clock = Stopwatch()
        try:
            if not loaded.opts.store_changes:
                if loaded.props.get(P_CHANGES_COLUMNS):  # switched off: not kept
                    self._drop_table(loaded)
                return
            stored = self._store(loaded, written, check)
        except LeaseLostError:  # never passed over: the lock is another writer's
            raise
        except (DbtRuntimeError, ChainPlanError) as e:
            logger.warning(f"{loaded.tables.view}: keeping the stored changes failed: {e}")
            return
        if stored:
            logger.info(f"{loaded.tables.view}: changes of {stored} partition(s) stored in {clock}")

    def _store(self, loaded: Loaded, written: Sequence[Values], check: Callable[[], None]) -> int:
        r, table, state = Renderer.of(loaded), str(changes_table(loaded.tables)), loaded.state()
        loaded = self._ensure_table(loaded, r)
        plans = (state.plan_read(*state.layout.split(part)) for part in written)
        serving = served_days(loaded, [p for p in plans if p is not None])
        token = uuid.uuid4().hex[:8]  # every store writes partitions no other store had
        added: list[Values] = []
        for (before, day), groups in sorted(targets(state, written, serving).items()):
            plan = _plan(loaded, state, before, day).restricted(groups)
            read_serving = served_days(loaded, [p for plans in plan.reads for p in plans])
            stamps = {g: f"{serving[g + day]}.{token}" for g in groups}
            self.run(insert_sql(r, table, sql.changes(r, plan, read_serving), stamps))
            added += [g + day + (s,) for g, s in stamps.items()]
        self.run(add_empty_sql(r, table, added))
        self._drop_garbage(loaded, table, added, check)
        return len(added)

    def _ensure_table(self, loaded: Loaded, r: Renderer) -> Loaded:
        """t__changes exists with the chain's columns: created again (empty) when they changed,
        so no stored row has another shape than the chain's reads."""
        digest = columns_digest(loaded.columns)
        if loaded.props.get(P_CHANGES_COLUMNS) == digest:
            return loaded
        if loaded.props.get(P_CHANGES_COLUMNS):
            self._drop_table(loaded)
        else:  # a table a crash or a full refresh left without its record
            self.run(S.drop_table(str(changes_table(loaded.tables))))
        self.run(create_sql(r, str(changes_table(loaded.tables))))
        self.catalog.set_properties(loaded.tables.snapshot, {P_CHANGES_COLUMNS: digest})
        return loaded.with_props({P_CHANGES_COLUMNS: digest, P_CHANGES_VOID: "{}"})

    def _drop_table(self, loaded: Loaded) -> None:
        """Unrecorded first, so no new read uses it; dropped after the reader grace."""
        keys = [k for k in (P_CHANGES_COLUMNS, P_CHANGES_VOID) if k in loaded.props]
        self.run(S.unset_properties(str(loaded.tables.snapshot), keys))
        self.catalog.changed()
        self.catalog.retire("stored changes", S.drop_table(str(changes_table(loaded.tables))))

    def _drop_garbage(
        self, loaded: Loaded, table: str, added: Collection[Values], check: Callable[[], None]
    ) -> None:
        """Drop the partitions no read uses again (unused); then the void list keeps the groups
        that still have a void partition (a drop that missed one), after `check` (the lease)."""
        state, void = loaded.state(), _void(loaded)
        listed = self.listed(loaded)
        voided_parts = [p for p in listed if p not in set(added) and is_void(state, void, p)]
        garbage = unused(listed, loaded.cumulative or (), voided_parts, added)
        cols = [*loaded.opts.partition_by, STAMP_COLUMN]
        self.catalog.retire("stored changes no read uses", S.drop_partitions(table, cols, garbage))
        if not void:
            return
        left = {
            loaded.layout.group_path(loaded.layout.split(p[:-1])[0])
            for p in self.listed(loaded)
            if p not in set(added) and is_void(state, void, p)
        }
        kept = {g: c for g, c in void.items() if g in left}
        check()
        if kept:
            value = json.dumps(kept, separators=(",", ":"))
            self.catalog.set_properties(loaded.tables.snapshot, {P_CHANGES_VOID: value})
        else:
            self.run(S.unset_properties(str(loaded.tables.snapshot), [P_CHANGES_VOID]))


def _void(loaded: Loaded) -> Void:
    raw = loaded.props.get(P_CHANGES_VOID)
    value = json.loads(raw) if raw else {}
    return dict(value) if isinstance(value, dict) else {}


def _plan(loaded: Loaded, state: ChainState, before: Values, day: Values) -> HistoryPlan:
    keys = loaded.opts.chain_keys
    return plan_history(
        state,
        dict(zip(keys, before, strict=True)),
        dict(zip(keys, day, strict=True)),
        loaded.history(),
        every_day=False,
        compacted=compacted_of(loaded),
    )
