"""The SQL vocabulary of one chain table, shared by every feature's SQL: its columns (table
order), the types of its partition columns, its branch tables, and how a partition or a set of
them is spelled in a query. Reads of the chain (read/render.py) and the cumulative delta's SQL
(cumulative/sql.py) build on it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Self

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import cols_sql, literal, q, spec_sql

if TYPE_CHECKING:
    from dbt.adapters.chaintable.chain.catalog import Loaded

# the most values of one IN list on a partition column (ChainSql._in)
IN_PIECE = 100


class ChainSql:
    """SQL for one chain table: its columns (table order), partition column types and branches."""

    def __init__(
        self,
        opts: ChainOptions,
        columns: Sequence[str],
        types: Mapping[str, str],
        snapshot: str,
        delta: str,
        cumulative: str = "",
    ):
        self.opts = opts
        self.columns = list(columns)
        self.types = {k.lower(): v for k, v in types.items()}
        self.snapshot = snapshot
        self.delta = delta
        self.cumulative = cumulative  # the cumulative delta table (cumulative/plan.py)

    @classmethod
    def of(cls, loaded: Loaded) -> Self:
        return cls(
            loaded.opts,
            loaded.column_names,
            loaded.types,
            str(loaded.tables.snapshot),
            str(loaded.tables.delta),
            str(loaded.tables.cumulative),
        )

    @property
    def data_columns(self) -> list[str]:
        parts = {c.lower() for c in self.opts.partition_by}
        return [c for c in self.columns if c.lower() not in parts]

    def type_of(self, column: str) -> str:
        return self.types.get(column.lower(), "string")

    def lit(self, column: str, value: str) -> str:
        return literal(value, self.type_of(column))

    def predicate(self, columns: Sequence[str], values: Sequence[str]) -> str:
        return (
            "("
            + " AND ".join(
                f"{q(c)} = {self.lit(c, v)}" for c, v in zip(columns, values, strict=False)
            )
            + ")"
        )

    def spec(self, values: Values) -> str:
        """A static partition spec of this table (spec_sql)."""
        return spec_sql(self.opts.partition_by, values)

    def partitions_predicate(self, parts: Iterable[Values]) -> str:
        """Exactly `parts`. With at most one group key and one chain key the partitions are
        grouped into rectangles (groups S x chain values C with the same S), each rendered as
        `g IN (S) AND c IN (C)`: a merged branch over 10 groups and 6 deltas is 1 term instead
        of 60, which keeps the view's text below the metastore's limit (Derby stores at most
        32,700 characters) and its analysis short. Pruning is the same (IN on partition columns)."""
        parts = sorted({tuple(p) for p in parts})
        if not parts:
            return "false"
        groups, chains = self.opts.group_keys, self.opts.chain_keys
        if len(groups) > 1 or len(chains) != 1:
            return " OR ".join(self.predicate(self.opts.partition_by, p) for p in parts)
        n = len(groups)
        by_chain: dict = {}
        for p in parts:
            by_chain.setdefault(p[n:], []).append(p[:n])
        by_groups: dict = {}
        for chain, gs in by_chain.items():
            by_groups.setdefault(tuple(gs), []).append(chain)
        terms = []
        for gs, cs in by_groups.items():
            conds = [self._in(groups[0], [g[0] for g in gs])] if n else []
            conds.append(self._in(chains[0], [c[0] for c in cs]))
            terms.append("(" + " AND ".join(conds) + ")")
        return " OR ".join(terms)

    def _in(self, column: str, values: Sequence[str]) -> str:
        """`column IN (values)`. Spark hands the metastore an IN list on a partition column of
        at most 1,000 values (spark.sql.hive.metastorePartitionPruningInSetThreshold) as one
        `c = v1 or c = v2 ...`, which the metastore nests one level a value: from ~700 values
        its Derby overflows the stack (tests/functional/test_many_groups.py). Such a list is
        said in pieces of IN_PIECE values (nested one level a piece); a longer one Spark
        hands over as a range."""
        if len(values) == 1:
            return f"{q(column)} = {self.lit(column, values[0])}"
        lits = [self.lit(column, v) for v in values]
        if len(lits) <= IN_PIECE or len(lits) > 1000:
            return f"{q(column)} IN ({', '.join(lits)})"
        pieces = [lits[i : i + IN_PIECE] for i in range(0, len(lits), IN_PIECE)]
        return "(" + " OR ".join(f"{q(column)} IN ({', '.join(p)})" for p in pieces) + ")"

    def select_all(self, table: str) -> str:
        """Every row of `table`, this table's columns in table order."""
        return f"SELECT {cols_sql(self.columns)} FROM {table}"

    def select(self, table: str, parts: Iterable[Values]) -> str:
        return (
            f"SELECT {cols_sql(self.columns)} FROM {table} WHERE {self.partitions_predicate(parts)}"
        )

    def relabel(self, chain: Values, columns: Sequence[str] | None = None) -> str:
        """Projection of `columns` (default: all, table order) that carries the target
        partition's chain values (rule 5)."""
        values = dict(zip(self.opts.chain_keys, chain, strict=False))
        return ", ".join(
            f"{self.lit(c, values[c])} AS {q(c)}" if c in values else q(c)
            for c in (self.columns if columns is None else columns)
        )
