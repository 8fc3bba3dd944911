"""The partition columns of one chain table and the forms a partition takes outside SQL:
its values (a tuple, group values then chain values) and its path (`region=CN/dt=20250101`, as
SHOW PARTITIONS prints it and as table properties store it). SQL forms (spec, predicate) are
rendered by sql/quoting.py and sql/render.py from the same values."""

from __future__ import annotations

from dataclasses import dataclass

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.chain.state import Values, format_partition, parse_partition_path


@dataclass(frozen=True)
class Layout:
    partition_by: tuple[str, ...]
    group_keys: tuple[str, ...]
    chain_keys: tuple[str, ...]

    @classmethod
    def of(cls, opts: ChainOptions) -> Layout:
        return cls(tuple(opts.partition_by), tuple(opts.group_keys), tuple(opts.chain_keys))

    def split(self, values: Values) -> tuple[Values, Values]:
        n = len(self.group_keys)
        return tuple(values[:n]), tuple(values[n:])

    def path(self, values: Values) -> str:
        return format_partition(self.partition_by, values)

    def parse(self, path: str) -> Values:
        return parse_partition_path(path, self.partition_by)

    def group_path(self, group: Values) -> str:
        return format_partition(self.group_keys, group)

    def chain_path(self, chain: Values) -> str:
        return format_partition(self.chain_keys, chain)

    def parse_group(self, path: str) -> Values:
        return parse_partition_path(path, self.group_keys) if self.group_keys else ()

    def parse_chain(self, path: str) -> Values:
        return parse_partition_path(path, self.chain_keys)
