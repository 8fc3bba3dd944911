"""Partition lists of the view said without naming each group (docs/design.md#branches-and-
relations): a list that holds every group known at a chain value is said with that value alone.
view/fit.py uses them only when the lists as they are would not fit the view's budget, so a small
chain's view is spelled as before."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Self

from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import q
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.read.render import Renderer


@dataclass(frozen=True)
class Known:
    """The partitions a view's state knows: both branches, and the snapshot partitions the
    view hides (`hidden`: still in the table, about to be dropped)."""

    state: ChainState
    hidden: frozenset[Values] = frozenset()

    @cached_property
    def holders(self) -> dict[Values, set[Values]]:
        """Per chain value, the groups with a partition there in either branch."""
        n = self.state.n_group
        out: dict[Values, set[Values]] = {}
        for p in self.state.snapshots | self.state.deltas | self.hidden:
            out.setdefault(p[n:], set()).add(p[:n])
        return out

    @cached_property
    def read_firsts(self) -> frozenset[str]:
        """The first chain values of the snapshot partitions the view reads."""
        return frozenset(self.state.layout.split(p)[1][0] for p in self.state.snapshots)

    def whole(self, parts: Iterable[Values]) -> tuple[list[Values], list[Values]]:
        """(the chain values at which `parts` hold every group with a partition there in either
        branch, in chain order; the parts at the other chain values). Selecting the chain value
        alone selects the same partitions of each branch as the list. Either branch counts, not
        only the table read: a compaction that publishes a snapshot of a day another group's
        anchor shares, or a delta a snapshot shares, is not read by a view planned before it."""
        n = self.state.n_group
        by_chain: dict[Values, set[Values]] = {}
        for p in parts:
            by_chain.setdefault(p[n:], set()).add(p[:n])
        holders = self.holders
        whole = {c for c, gs in by_chain.items() if gs >= holders.get(c, set())}
        rest = [g + c for c, gs in by_chain.items() if c not in whole for g in gs]
        return sorted(whole, key=self.state.sort_key), rest

    def excluded(self, parts: Iterable[Values]) -> tuple[list[tuple[str, str]], list[Values]]:
        """The snapshot partitions `parts` (the view must not read them) as (ranges (low,
        high) of the first chain key, the parts to list). A range holds no first value of a
        snapshot partition the view reads, so it leaves out the same partitions of the table
        as the list; a snapshot published later inside one (a compaction's) is read once the
        view is refreshed, as a mapped day's is (ViewSql.view)."""
        n = self.state.n_group
        parts = list(parts)
        firsts = {p[n] for p in parts}
        order = sorted(firsts | self.read_firsts, key=lambda v: self.state.sort_key((v,)))
        runs: list[list[str]] = []
        open_run = False
        for value in order:
            if value in self.read_firsts:
                open_run = False
            elif open_run:
                runs[-1][1] = value
            else:
                runs.append([value, value])
                open_run = True
        listed = [p for p in parts if p[n] in self.read_firsts]
        return [(low, high) for low, high in runs], listed


class CompactSql(Renderer):
    """A renderer that says its partition lists over `known` (Known), or as they are (None)."""

    known: Known | None = None

    def knowing(self, known: Known | None) -> Self:
        """This renderer with `known` (a copy: the lists of other statements stay exact)."""
        out = copy.copy(self)
        out.known = known
        return out

    def partitions_predicate(self, parts: Iterable[Values]) -> str:
        """Exactly `parts` of a branch: the chain values at which they hold every known group
        alone (Known.whole), the other partitions as ChainSql lists them."""
        if self.known is None:
            return super().partitions_predicate(parts)
        whole, rest = self.known.whole(parts)
        terms = [self.chain_in(whole)] if whole else []
        terms += [super().partitions_predicate(rest)] if rest else []
        if len(terms) < 2:
            return terms[0] if terms else "false"
        return " OR ".join(f"({t})" for t in terms)

    def chain_in(self, chains: Sequence[Values]) -> str:
        keys = self.opts.chain_keys
        if len(keys) == 1:
            return self._in(keys[0], [c[0] for c in chains])
        return " OR ".join(self.predicate(keys, c) for c in chains)

    def not_in(self, parts: Sequence[Values]) -> str:
        """Neither of the snapshot partitions `parts` (Known.excluded over `known`)."""
        if self.known is None:
            return f"NOT ({self.in_partitions(parts)})"
        runs, listed = self.known.excluded(parts)
        terms = [self.in_runs(runs)] if runs else []
        terms += [self.in_partitions(listed)] if listed else []
        return f"NOT ({' OR '.join(terms)})"

    def in_runs(self, runs: Sequence[tuple[str, str]]) -> str:
        """The first chain key in one of `runs` (low, high), false for NULL."""
        first = self.opts.chain_keys[0]
        x = q(first)
        conds = [
            f"{x} = {self.lit(first, low)}"
            if low == high
            else f"{x} >= {self.lit(first, low)} AND {x} <= {self.lit(first, high)}"
            for low, high in runs
        ]
        either = conds[0] if len(conds) == 1 else " OR ".join(f"({c})" for c in conds)
        return f"coalesce({either}, false)"
