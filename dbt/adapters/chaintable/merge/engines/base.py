"""What a merge engine is (docs/design.md#merge-order-and-engines): one object per engine, in a
module of its own, registered in merge/engines/__init__.py. Nothing else in the adapter names an
engine: it asks the engine of a chain's options (`engine_of`) what it does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.merge.ranked import pick_one
from dbt.adapters.chaintable.merge.rules import Types


@dataclass(frozen=True)
class MergeInput:
    """A merge of `source_sql`'s rows (`columns`, ANCHOR) to one row per `keys` (merge/sql.py
    merge_select): `keep_deletes` keeps a removed key as its -U/-D row, `drop_anchor` leaves
    out a key whose anchor row wins (engines that pick one row), `types` keeps aggregated
    columns in their type."""

    opts: ChainOptions
    columns: Sequence[str]
    source_sql: str
    keys: Sequence[str]
    types: Types = None
    keep_deletes: bool = False
    drop_anchor: bool = False


class Engine:
    """The defaults: an engine that keeps every row, refuses nothing, and whose merge of a key's
    rows can go on from a merged state when late rows come (commutative)."""

    name = ""
    # keeps one of a key's rows as it is (deduplicate, first-row): the cumulative delta's build
    # ranks every changed key's rows in one window, where a tie shows (run/checks.py)
    picks_one_row = False
    # the latest row in merge order wins (first-row: the earliest)
    latest_wins = True
    # every row of a key in one partition is input, not a duplicate (aggregation: count counts
    # rows): a snapshot write merges its partitions, and a tie matters only in the columns whose
    # function depends on the order of its inputs
    combines_rows = False

    def merge_select(self, m: MergeInput) -> str:
        """One row per key of the input's rows."""
        raise NotImplementedError(self.name)

    def ignored(self, opts: ChainOptions) -> str | None:
        """Predicate over prepared rows for the rows the engine drops before merging."""
        return None

    def refusal(self, opts: ChainOptions, columns: Sequence[str]) -> str | None:
        """Why the engine cannot take a -U/-D row of this chain, or None when it can."""
        return None

    def needs_anchor(self, opts: ChainOptions) -> bool:
        """Whether a key's merged state can depend on its anchor row."""
        return True

    def ranks_by_sequence(self, opts: ChainOptions) -> bool:
        """Whether the highest sequence alone decides the winner (the cumulative delta may then
        leave an anchor out whose rows all rank below the day's: cumulative/plan.py)."""
        return False

    def late_rows_commute(self, opts: ChainOptions, value_columns: Sequence[str]) -> bool:
        """Whether a merged state plus rows that arrive late in sequence order merge as all the
        rows would (the cumulative delta built from the day before: cumulative/plan.py)."""
        return True


class PicksOne(Engine):
    """An engine that keeps one of a key's rows as it is (ranked.pick_one)."""

    picks_one_row = True

    def merge_select(self, m: MergeInput) -> str:
        return pick_one(
            m.opts, m.columns, m.source_sql, m.keys, self, m.keep_deletes, m.drop_anchor
        )
