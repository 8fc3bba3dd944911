"""The view's text within the metastore's limit (docs/design.md#branches-and-relations), however
many groups and partitions the chain has. A literal branch exists for read speed only, and its
partition lists name each group: a view is spelled as view/layout.py lays it out while that
fits; else with compact lists (view/compact.py); else its oldest literal branches go to the
mapping table, whose one join reads any number of days with the same text; and last the hidden
snapshot partitions (ViewSql.view) go there too, left out by an anti join."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan
from dbt.adapters.chaintable.view.compact import Known
from dbt.adapters.chaintable.view.layout import mapped_runs, split_layout, stored_in, view_cut
from dbt.adapters.chaintable.view.sql import UNION, ViewSql

# characters of the view's text: the embedded Derby metastore keeps at most 32,700 of them
# (TBLS.VIEW_EXPANDED_TEXT) and refuses a CREATE or ALTER VIEW with a longer one; the rest is
# margin (the mapping's version is measured with MEASURED_VERSION, the statement's own words)
VIEW_BUDGET = 30_000
# stands for the mapping's version while the text is measured: versions.new_run_id() gives 23
# characters, a version reused is one of those
MEASURED_VERSION = "0" * 32

# ranges of mapped days the view names (view/layout.py, mapped_runs): a snapshot day between two of
# them is read without the mapping's scans (measured on the benchmark's compacted day at 10M
# rows: 2.35 -> 2.15 s, the stored partition 1.73 s); the older ones merge into one
MAPPED_RUNS = 4

Branches = Sequence[tuple[Values, list[ReadPlan]]]


@dataclass(frozen=True)
class ViewPlan:
    """How the view is written: its renderer (compact lists or not), literal branches, mapped
    reads and their runs, and the hidden snapshot partitions, listed or mapped."""

    renderer: ViewSql
    literal: list[tuple[Values, list[ReadPlan]]]
    mapped: list[ReadPlan]
    runs: list[tuple[str, str]]
    stored_in_runs: bool
    hidden: list[Values]
    hidden_mapped: bool = False

    def text(self, mapping: tuple[str, str], serving: Mapping[Values, str]) -> str:
        return self.renderer.view(*self._args(mapping, serving))

    def frame(self, mapping: tuple[str, str], serving: Mapping[Values, str]) -> list[str]:
        """The view's branches but the literal ones (ViewSql.view_frame)."""
        head, tail = self.renderer.view_frame(*self._args(mapping, serving))
        return head + tail

    def _args(self, mapping: tuple[str, str], serving: Mapping[Values, str]) -> tuple:
        return (
            (self.literal, self.mapped),
            mapping,
            serving,
            self.runs,
            self.stored_in_runs,
            self.hidden,
            self.hidden_mapped,
        )

    def map_rows(self, serving: Mapping[Values, str]) -> list[str]:
        """The rows of the mapping this view reads (none: it reads no mapping)."""
        hidden = self.hidden if self.hidden_mapped else ()
        return self.renderer.map_rows(self.mapped, serving, hidden)


def plan_view(
    renderer: ViewSql,
    state: ChainState,
    branches: Branches,
    recent: int,
    serving: Mapping[Values, str],
    hidden: Sequence[Values],
    cmap: str,
    budget: int = VIEW_BUDGET,
) -> ViewPlan:
    """The first layout whose text fits `budget`: view_layout's as it is (a small chain's view
    is spelled as before); with compact lists and the oldest literal branches mapped, as few
    as fit; then with the hidden partitions mapped too. `branches`: view_branches(state);
    `serving`: the days of them the cumulative delta serves."""
    cut = view_cut(state, branches, recent)
    compact = renderer.knowing(Known(state, frozenset(hidden)))
    every = range(cut, len(branches) + 1)
    tiers: list[tuple[ViewSql, Iterable[int], bool]] = [(renderer, [cut], False)]
    tiers.append((compact, every, False))
    if hidden:
        tiers.append((compact, every, True))
    plan = None
    for r, cuts, hidden_mapped in tiers:
        sizes = _LiteralSizes(r, branches, serving, budget)
        for c in cuts:
            if sizes.suffix(c) is None:
                continue  # its literal branches alone are over the budget
            literal, mapped = split_layout(branches, c)
            runs = mapped_runs(state, mapped, MAPPED_RUNS)
            plan = ViewPlan(
                r, literal, mapped, runs, stored_in(state, runs), list(hidden), hidden_mapped
            )
            frame = plan.frame((cmap, MEASURED_VERSION), serving)
            chars = sum(map(len, frame)) + len(UNION) * (len(frame) - 1) + (sizes.suffix(c) or 0)
            if chars <= budget:
                return plan
    assert plan is not None  # the last tier's last cut has no literal branch
    return plan  # nothing that grows with groups or history is left in it


class _LiteralSizes:
    """The characters of the newest literal branches, rendered newest first and only as far
    as they can fit: a branch of 10,000 groups is rendered once, not once per layout tried."""

    def __init__(
        self, renderer: ViewSql, branches: Branches, serving: Mapping[Values, str], budget: int
    ):
        self.renderer, self.branches, self.serving, self.budget = (
            renderer,
            branches,
            serving,
            budget,
        )
        self.sums = [0]  # sums[k]: the newest k branches, each with its separator
        self.over = False  # the next branch no longer fits

    def suffix(self, cut: int) -> int | None:
        """The characters of the branches from `cut` on; None past the budget."""
        want = len(self.branches) - cut
        while len(self.sums) <= want and not self.over:
            chain, plans = self.branches[len(self.branches) - len(self.sums)]
            size = len(self.renderer.literal_branch(chain, plans, self.serving)) + len(UNION)
            if self.sums[-1] + size > self.budget:
                self.over = True
            else:
                self.sums.append(self.sums[-1] + size)
        return self.sums[want] if want < len(self.sums) else None
