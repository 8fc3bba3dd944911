"""deduplicate: the latest row of a key wins; a -U/-D row removes the key."""

from __future__ import annotations

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.merge.engines.base import PicksOne


class Deduplicate(PicksOne):
    name = "deduplicate"

    def needs_anchor(self, opts: ChainOptions) -> bool:
        # without a sequence field the latest partition wins: any delta row beats the anchor's
        return bool(opts.sequence_field)

    def ranks_by_sequence(self, opts: ChainOptions) -> bool:
        return bool(opts.sequence_field)
