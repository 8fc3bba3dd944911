"""A chain_incremental model with batches (docs/design.md#batches): dbt's microbatch runner
splits only incremental models, so the materialization runs the batches itself, in one node:
plan.loop_starts names them, and each is a chain run of its batch as dbt's batches are
(Batches.prepare_one), over the model's rows of that batch (plan.batch_sql). The first failure
stops the loop with the earlier batches published."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dbt.adapters.base.relation import BaseRelation
from dbt_common.exceptions import DbtRuntimeError
from dbt_common.invocation import get_invocation_id

from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.batch import plan
from dbt.adapters.chaintable.batch.batches import BatchCall, Batches, BatchRun, _message
from dbt.adapters.chaintable.batch.plan import Batch, BatchSpec
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.run.model import ChainRun, RunResult


def loops(config: Mapping[str, Any]) -> bool:
    """Whether a chain_incremental model runs batches: it declares batch_size and no
    chain_partition (which names the one partition a run writes, and wins)."""
    config = dict(config)
    return bool(config.get("batch_size")) and not config.get("chain_partition")


@dataclass
class LoopRun:
    """What chain_prepare_loop decided; chain_execute_loop runs the batches. Each batch is
    prepared when its turn comes (the chain it writes is the one the batch before left)."""

    call: BatchCall
    batches: list[Batch]
    view_exists: bool  # dbt's relation cache had the view when the run began
    invocation: str  # dbt's
    runs: list[ChainRun] = field(default_factory=list)  # the batches written
    done: bool = False

    @property
    def full_refresh(self) -> bool:
        return self.call.full_refresh

    @property
    def writes(self) -> bool:
        """Before the loop: whether it may write (dbt's contract check); after: whether a
        batch was written (grants and docs)."""
        return bool(self.runs) or not self.done

    @property
    def relations(self) -> list[BaseRelation]:
        return self.runs[-1].relations if self.runs else [self.call.relation]


class BatchLoop:
    def __init__(self, batches: Batches):
        self.batches = batches

    def prepare(self, call: BatchCall, now: dt.datetime | None = None) -> LoopRun:
        """The batches of this run (none is written yet)."""
        spec = BatchSpec.of(call.model, call.opts, call.config)
        new_chain = call.full_refresh or not self.batches.catalog.branches_exist(
            ChainTables.of(call.relation)
        )
        try:
            starts = plan.loop_starts(
                spec.size,
                now or dt.datetime.now(dt.UTC),
                call.args,
                call.config.get("begin"),
                call.config.get("lookback"),
                new_chain,
            )
        except Exception as e:
            raise DbtRuntimeError(f"chain model '{call.model}' with batches: {_message(e)}") from e
        batches = [spec.batch(s) for s in starts]
        logger.info(
            f"chain model '{call.model}': {len(batches)} batch(es), "
            f"{batches[0].label} to {batches[-1].label}"
        )
        current = call.existing()
        exists = current is not None and current.is_view
        return LoopRun(call, batches, view_exists=exists, invocation=get_invocation_id())

    def _prepare(self, loop: LoopRun, one: Batch) -> BatchRun:
        # a full refresh rebuilds the chain with the first batch written; the rest add to it
        first = not loop.runs
        call = loop.call
        if not first:
            call = replace(call, full_refresh=False, grants_probe=None)
        return self.batches.prepare_one(call, one, loop.invocation)

    def execute(self, loop: LoopRun, compiled_code: str) -> RunResult:
        """Each batch in order; the first failure stops the loop (the earlier batches stay
        published) and fails the node, naming the batch, for dbt retry."""
        rows, skipped, total = 0, 0, len(loop.batches)
        for i, one in enumerate(loop.batches, 1):
            logger.info(f"{one.describe()}: batch {i} of {total}")
            try:
                run = self._prepare(loop, one)
                if run.run is None:
                    skipped += 1
                    continue
                result = self.batches.execute(run, plan.batch_sql(compiled_code, one))
            except DbtRuntimeError as e:
                loop.done = True
                raise DbtRuntimeError(
                    f"{_message(e)}; batches written before it stay published, dbt retry (or "
                    f"the same command again) writes from {one.label} on"
                ) from e
            rows += result.rows_affected
            loop.runs.append(run.run)
        loop.done = True
        written = len(loop.runs)
        return RunResult(f"OK: {written} batch(es) written, {skipped} skipped", rows)
