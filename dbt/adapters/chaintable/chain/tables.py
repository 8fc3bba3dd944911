"""The names of one chain table's relations (docs/design.md#branches-and-relations): its
branches, view, derived tables, lock and each writer's scratch tables."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.values import ChainConfigError

SNAPSHOT_SUFFIX = "__snapshot"
DELTA_SUFFIX = "__delta"
STAGE_SUFFIX = "__chain_stage"
PUB_SUFFIX = "__chain_pub"
GC_SUFFIX = "__chain_gc"
LOCK_SUFFIX = "__chain_lock"
# a stale lock a writer broke, renamed to `t__chain_lock_broken_<writer>`: the rename is what
# makes breaking atomic (one of two racing writers renames it, the other finds nothing to
# rename), and the renamed view keeps the dead run's record until its recovery is done
BROKEN_LOCK_SUFFIX = "__chain_lock_broken_"
# the tables and views a writer creates for one write and drops after it (each writer's own
# stage and pub carry its writer id): whatever of them the lock's holder finds was left by a
# writer that is gone or no longer holds the lock (publish/recovery.py)
SCRATCH_SUFFIXES = (STAGE_SUFFIX, PUB_SUFFIX, GC_SUFFIX, BROKEN_LOCK_SUFFIX)
MAP_SUFFIX = "__chain_map"
CUMULATIVE_SUFFIX = "__cumulative"
CHANGES_SUFFIX = "__changes"  # stored changes (history/stored.py)
STAMP_COLUMN = "ct__stamp"  # the partition column of t__cumulative after partition_by
CHAIN_PATTERN = "__*"  # every table of a chain `t` is named `t__...`


def name_of(relation: BaseRelation) -> str:
    """A relation's table name (a chain's relations always have one)."""
    if not relation.identifier:
        raise ChainConfigError(f"{relation}: a chain table needs a name")
    return relation.identifier


def listed(names: Collection[str] | None, relation: BaseRelation) -> bool | None:
    """Whether a listing's lower-case `names` hold `relation`; None when there was none."""
    return None if names is None else name_of(relation).lower() in names


def schema_of(relation: BaseRelation) -> str:
    if not relation.schema:
        raise ChainConfigError(f"{relation}: a chain table needs a schema")
    return relation.schema


def split_relation(name: str, default_schema: str) -> tuple[str, str]:
    """An operation's `relation:` argument -> (schema, identifier): `t`, `schema.t`,
    `` `schema`.`t` `` or a three-part name (the catalog part is not used)."""
    parts = [p.strip().strip("`") for p in str(name).split(".")]
    if not all(parts):
        raise ChainConfigError(f"relation '{name}' is not a table name (schema.name)")
    return (parts[-2], parts[-1]) if len(parts) > 1 else (default_schema, parts[0])


@dataclass(frozen=True)
class ChainTables:
    """The relations of one chain table `t` (docs/design.md#branches-and-relations)."""

    view: BaseRelation
    snapshot: BaseRelation
    delta: BaseRelation
    stage: BaseRelation  # the model's rows of one run (checked before anything is published)
    pub: BaseRelation  # merged rows of one run or compaction, published partition by partition
    gc: BaseRelation  # managed scratch table: dropping its partitions deletes old directories
    lock: BaseRelation  # a view whose existence means a writer is at work
    cmap: BaseRelation  # which partitions feed each older delta-only partition (the view reads it)
    cumulative: BaseRelation  # the cumulative delta (cumulative/plan.py): derived, rebuilt from both branches

    @classmethod
    def of(cls, relation: BaseRelation) -> ChainTables:
        def rel(suffix: str, kind: str) -> BaseRelation:
            return relation.incorporate(path={"identifier": name_of(relation) + suffix}, type=kind)

        writer = versions.writer_id()
        return cls(
            view=relation.incorporate(type="view"),
            snapshot=rel(SNAPSHOT_SUFFIX, "table"),
            delta=rel(DELTA_SUFFIX, "table"),
            stage=rel(f"{STAGE_SUFFIX}_{writer}", "table"),
            pub=rel(f"{PUB_SUFFIX}_{writer}", "table"),
            gc=rel(GC_SUFFIX, "table"),
            lock=rel(LOCK_SUFFIX, "view"),
            cmap=rel(MAP_SUFFIX, "table"),
            cumulative=rel(CUMULATIVE_SUFFIX, "table"),
        )

    @classmethod
    def of_branch(cls, branch: BaseRelation) -> ChainTables:
        """The chain a branch table (`t__snapshot` or `t__delta`) belongs to."""
        ident = name_of(branch)
        for suffix in (SNAPSHOT_SUFFIX, DELTA_SUFFIX):
            if ident.endswith(suffix):  # one suffix: a model may be named `orders__delta`
                ident = ident[: -len(suffix)]
                break
        return cls.of(branch.incorporate(path={"identifier": ident}, type="view"))

    def branch(self, name: str) -> BaseRelation:
        return self.snapshot if name == "snapshot" else self.delta

    def broken_lock(self, writer: str) -> BaseRelation:
        """The name a writer renames a stale lock to when it breaks it."""
        ident = name_of(self.view) + BROKEN_LOCK_SUFFIX + writer
        return self.lock.incorporate(path={"identifier": ident})

    def scratch(self, names: Collection[str]) -> list[str]:
        """The lower-case `names` (a listing of the chain's tables) that are scratch tables or
        broken locks (SCRATCH_SUFFIXES), of any writer."""
        base = name_of(self.view).lower()
        return sorted(
            n for n in names if any(n.startswith(base + s.lower()) for s in SCRATCH_SUFFIXES)
        )
