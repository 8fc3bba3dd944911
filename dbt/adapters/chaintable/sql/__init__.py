"""The SQL layer: every statement the adapter sends is made here, and only here.

quoting.py   identifiers, string literals, typed partition literals, partition specs
merge.py     the chain merge (one place decides what a key's rows merge to) and the stage checks
render.py    reads and writes of one chain table's rows (view, chain_read, compaction, inserts)
statements.py catalog and DDL statements (listings, create, drop, partition switches, properties)
"""
