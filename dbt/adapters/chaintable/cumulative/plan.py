"""The cumulative delta, pure parts (docs/design.md#cumulative-delta): which days of which groups
it serves, which it must (re)build after a write, and from what.

For a group and a delta-only day D whose read plan is anchor A + deltas (A, D], the cumulative
partition C(D) holds, for every key changed in (A, D], the key's merged state over the anchor row
and those deltas, a retraction row where the merge removes the key (a tombstone). A read of D is
then `anchor rows whose key is not in C(D)` plus `C(D)'s live rows`: one scan of the anchor and
a broadcast, whatever the chain's length.

Each C partition carries a stamp: a digest of what it was built from (the read plan's anchor and
delta chain values, the merge options and the columns). A day is served from C only when a C
partition with the stamp of the day's current plan exists; anything else (a day added before it,
a new anchor, an expired or dropped input, another option) changes the stamp, so a C partition
can never be read for inputs it was not built from. Rewrites in place (a delta day written
again, a snapshot overwritten) keep the names: the adapter drops the C partitions they affect
before it changes the inputs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt.adapters.chaintable.base.keys import INTEGRAL_TYPES
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain.catalog import Loaded
from dbt.adapters.chaintable.chain.lineage import merge_inputs
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan
from dbt.adapters.chaintable.merge.engines import engine_of
from dbt.adapters.chaintable.merge.rules import ORDER_SENSITIVE_FUNCTIONS

# the data column of t__cumulative after the table's own: on the first key of each block of
# keys, the block's bitmap (see mask_key); NULL on the other rows
MASK_COLUMN = "ct__mask"
MASK_SHIFT = 6  # a mask row covers 2**6 = 64 consecutive key values, one bit each
# on t__snapshot: t__cumulative has MASK_COLUMN (a table created before it is altered once)
P_LAYOUT = "chaintable.cumulative-layout"
LAYOUT = "mask"
# on t__snapshot: t__cumulative's location; a day's partition is written to a directory of
# its own below it, `_chain_v/<stamp>` (base/versions.py), then added
P_LOCATION = "chaintable.cumulative-location"
# sequence types whose values compare as the integers SQL gives for them (run/stage.py)
ORDINAL_SEQUENCE_TYPES = (*INTEGRAL_TYPES, "date", "timestamp")


def mask_key(opts: ChainOptions, types: Mapping[str, str]) -> str | None:
    """The key column whose values the mask rows of a C partition cover, or None.

    A read of a served day drops the anchor rows whose key C holds. With one integral key
    column (besides group keys), the row of the lowest key of each block of 64 consecutive key
    values in a C partition also carries a 64-bit mask of the block's keys in C; the read then
    probes the block (key >> 6) among those rows and tests the key's bit. The blocks of a day's changed
    keys are far fewer than the keys and span a narrow range, which Spark's broadcast hash
    join of one long key looks up in an array instead of a hash table (benchmark, 10M rows, a
    day 6 deltas after its anchor: the anchor's anti join against ~590k keys cost ~1 s over
    the anchor's scan, against their blocks ~0.2-0.3 s). Other keys keep the key join."""
    lower = {k.lower(): v.lower() for k, v in types.items()}
    groups = {g.lower() for g in opts.group_keys}
    keys = [k for k in opts.merge_keys if k.lower() not in groups]
    if len(keys) == 1 and lower.get(keys[0].lower()) in INTEGRAL_TYPES:
        return keys[0]
    return None


def build_checks_rows(opts: ChainOptions) -> bool:
    """Whether a daily run's cumulative build may stand in for the checks' scan of its staged
    rows (docs/design.md#validation): a chain that keeps the cumulative delta and picks one row
    per key (deduplicate, first-row), whose build ranks every changed key's rows in one
    window where a tie shows. Aggregating and partial-update merges combine rows instead."""
    return opts.cumulative_delta and engine_of(opts).picks_one_row


def options_digest(opts: ChainOptions, columns: Sequence[str], mask: str | None = None) -> str:
    """What else a C partition's content depends on: merge options, columns and whether it
    holds mask rows (`mask_key`)."""
    inputs = merge_inputs(opts, columns)
    if mask:
        inputs += (LAYOUT, mask)
    text = repr(inputs)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def stamp(plan: ReadPlan, digest: str) -> str:
    """The stamp of a delta-only day's read plan (anchor + deltas) under `digest`."""
    anchor = "/".join(plan.anchor) if plan.anchor is not None else "-"
    day = "/".join(plan.group + plan.chain)  # unique per partition: no stamp of one group's
    # day can match another group's partition
    text = f"{digest}|{day}|{anchor}|{','.join('/'.join(d) for d in plan.deltas)}"
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def needs_anchor(opts: ChainOptions) -> bool:
    """Whether a key's merged state can depend on its anchor row. Deduplicate without a
    sequence field: the latest partition wins, so any delta row beats the anchor's."""
    return engine_of(opts).needs_anchor(opts)


def ordinal_sequence_type(opts: ChainOptions, types: Mapping[str, str]) -> str | None:
    """The sequence field's type when a build may leave the anchor out (anchor_can_win):
    deduplicate with a sequence field whose values compare as integers; else None."""
    if not opts.sequence_field or not engine_of(opts).ranks_by_sequence(opts):
        return None
    lower = {k.lower(): v.lower() for k, v in types.items()}
    kind = lower.get(opts.sequence_field.lower())
    return kind if kind in ORDINAL_SEQUENCE_TYPES else None


def sequence_maxima(rows: Iterable[Sequence[Any]], keys: int) -> dict[Values, int | None]:
    """Each partition's highest sequence from the rows of a scan that gives its `keys` partition
    values first and the maximum last (cumulative/sql.py, sequence_max): an integer, or None
    where the partition holds only NULL sequences. A partition with no rows has no row, so no
    entry. A connection may give the numbers back as int, Decimal or str."""
    return {
        tuple(str(v) for v in row[:keys]): None if row[-1] is None else int(row[-1]) for row in rows
    }


def anchor_can_win(anchor_max: int | None, deltas_min: float | None) -> bool:
    """Whether an anchor row can win over a row of the build's deltas (deduplicate with a
    sequence field: the highest sequence wins, a NULL is the lowest, a tie goes to the later
    partition). It cannot when every delta row's sequence is above the anchor's highest; then
    the build leaves the anchor's stand-ins out and gives the same rows without scanning the
    anchor. None: not known (an anchor of only NULL sequences, a delta with a NULL one)."""
    return anchor_max is None or deltas_min is None or deltas_min <= anchor_max


def incremental(opts: ChainOptions, value_columns: Sequence[str]) -> bool:
    """Whether C(D) can be built from C(previous day) plus delta D: every row of D comes after
    every earlier row in merge order (no sequence field), or the merge does not depend on the
    order of rows that arrive late (deduplicate and first-row pick one row; commutative
    aggregates). Otherwise C(D) is built from the anchor and every delta of the changed keys.

    Sequence groups: a C row carries each group's sequence values, and a state row merges like
    an anchor row (the group's values so far, at the group's sequence), so C(previous) plus D
    gives the merge of every row as long as D's rows come after the state's in merge order
    (no sequence field), no tombstone has to carry a group's retractions (no -U/-D kept),
    and no member's function depends on where a late row falls among earlier ones."""
    if opts.sequence_groups:
        members = [c for _, cols in opts.sequence_groups for c in cols]
        return not (
            opts.sequence_field
            or (opts.rowkind_field and not opts.ignore_delete)
            or any(
                c in opts.aggregate_functions
                and opts.aggregate_function(c) in ORDER_SENSITIVE_FUNCTIONS
                for c in members
            )
        )
    if not opts.sequence_field:
        return True
    return engine_of(opts).late_rows_commute(opts, value_columns)


@dataclass(frozen=True)
class Build:
    """How to build C for one group and day: from the previous day's C partition (`previous`,
    with `previous_stamp`) plus the day's own delta, or from the anchor and every delta."""

    plan: ReadPlan
    stamp: str
    previous: Values | None = None  # chain values of the previous delta day, its C serving
    previous_stamp: str = ""

    @property
    def partition(self) -> Values:
        """Its C partition: the group and day values, then the stamp."""
        return self.plan.group + self.plan.chain + (self.stamp,)

    @property
    def deltas(self) -> tuple[Values, ...]:
        """The delta partitions (chain values) whose rows go into the build."""
        return self.plan.deltas[-1:] if self.previous is not None else self.plan.deltas


class Cumulative:
    """The cumulative partitions of one chain against its current state."""

    @classmethod
    def of(cls, loaded: Loaded, state: ChainState | None = None) -> Cumulative:
        """The cumulative delta's partitions against `state` (default: the catalog's)."""
        return cls(
            state or loaded.state(),
            loaded.cumulative or (),
            options_digest(loaded.opts, loaded.column_names, mask_key(loaded.opts, loaded.types)),
        )

    def __init__(self, state: ChainState, stored: Iterable[Values], digest: str):
        """`stored`: the C partitions that exist, as partition values + stamp."""
        self.state, self.digest = state, digest
        self.stored: dict[Values, set[str]] = {}
        for part in stored:
            self.stored.setdefault(tuple(part[:-1]), set()).add(part[-1])

    def expected(self, plan: ReadPlan) -> str:
        return stamp(plan, self.digest)

    def serving(self, plans: Iterable[ReadPlan]) -> dict[Values, str]:
        """{group + chain: stamp} of the delta-only days in `plans` that C serves."""
        out = {}
        for p in plans:
            if p.from_snapshot:
                continue
            want = self.expected(p)
            if want in self.stored.get(p.group + p.chain, ()):
                out[p.group + p.chain] = want
        return out

    def garbage(self) -> list[Values]:
        """C partitions (values + stamp) that serve no day of the current state. A compacted
        day keeps the C partition of its delta-only read: compaction with overwrite reads it,
        and it serves the day again if the snapshot partition is dropped."""
        out = []
        for part, stamps in sorted(self.stored.items()):
            group, chain = self.state.layout.split(part)
            plan = self.state.plan_read(group, chain, use_snapshot=False)
            keep = self.expected(plan) if plan is not None else None
            out += [part + (s,) for s in sorted(stamps) if s != keep]
        return out

    def affected(self, written: Iterable[Values]) -> list[Values]:
        """Delta-only days (group + chain) of the current state whose read includes one of the
        `written` delta partitions, or whose anchor is one of them: what a write of those
        partitions changes. Includes the written days themselves."""
        written = {tuple(p) for p in written}
        out = []
        for plan in self.state.delta_only():
            sources = {plan.group + d for d in plan.deltas}
            if plan.anchor is not None:
                sources.add(plan.group + plan.anchor)
            if sources & written:
                out.append(plan.group + plan.chain)
        return out

    def kept_affected(self, branch: str, written: Iterable[Values]) -> list[Values]:
        """C partitions (values + stamp) kept for compacted days (see `garbage`) whose
        delta-only read has one of the `written` partitions of `branch` as a delta or as its
        anchor: a write in place of those makes them stale under the same stamp, and
        compaction with overwrite would read them."""
        written = {tuple(p) for p in written}
        out = []
        for part, stamps in sorted(self.stored.items()):
            if part not in self.state.snapshots:
                continue  # a delta-only day: `affected`
            group, chain = self.state.layout.split(part)
            plan = self.state.plan_read(group, chain, use_snapshot=False)
            if plan is None:
                continue
            if branch == "delta":
                sources = {group + d for d in plan.deltas}
            else:
                sources = {group + plan.anchor} if plan.anchor is not None else set()
            if sources & written:
                out += [part + (s,) for s in sorted(stamps)]
        return out

    def builds(self, days: Iterable[Values], incremental_ok: bool) -> list[Build]:
        """Builds for `days` (group + chain values of delta-only days), in chain order within
        each group, each from the previous day's C when that one serves or is built before."""
        wanted = sorted(
            {tuple(d) for d in days},
            key=lambda v: (
                self.state.layout.split(v)[0],
                self.state.sort_key(self.state.layout.split(v)[1]),
            ),
        )
        ready = {k: s for k, v in self.stored.items() for s in v if self._serves(k, s)}
        out = []
        for day in wanted:
            group, chain = self.state.layout.split(day)
            plan = self.state.plan_read(group, chain)
            if plan is None or plan.from_snapshot:
                continue
            previous = plan.deltas[-2] if len(plan.deltas) > 1 else None
            prev_stamp = ready.get(group + previous) if previous is not None else None
            build = Build(plan, self.expected(plan))
            if incremental_ok and previous is not None and prev_stamp is not None:
                build = Build(plan, build.stamp, previous, prev_stamp)
            elif incremental_ok and previous is None:
                build = Build(plan, build.stamp)  # the first day after the anchor: its delta
            out.append(build)
            ready[day] = build.stamp
        return out

    def _serves(self, part: Values, stamp_: str) -> bool:
        group, chain = self.state.layout.split(part)
        plan = self.state.plan_read(group, chain)
        return plan is not None and not plan.from_snapshot and self.expected(plan) == stamp_


def served_days(
    loaded: Loaded, plans: Sequence[ReadPlan], state: ChainState | None = None
) -> dict[Values, str]:
    """{group + chain: stamp} of the days of `plans` read from the cumulative delta."""
    if not loaded.opts.cumulative_delta or not loaded.cumulative:
        return {}
    return Cumulative.of(loaded, state).serving(plans)
