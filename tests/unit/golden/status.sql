group      snapshots  deltas  latest snapshot  chain length
---------  ---------  ------  ---------------  ------------
region=CN  2          9       dt=20250108      2
region=US  1          3       dt=20250101      3

group      partition    read from (anchor)  deltas merged  read as
---------  -----------  ------------------  -------------  --------------------------------------------------
region=CN  dt=20250101  snapshot            -              snapshot
region=CN  dt=20250102  dt=20250101         1              merge (no cumulative delta built for these inputs)
region=CN  dt=20250103  dt=20250101         2              merge (no cumulative delta built for these inputs)
region=CN  dt=20250104  dt=20250101         3              merge (no cumulative delta built for these inputs)
region=CN  dt=20250105  dt=20250101         4              merge (no cumulative delta built for these inputs)
region=CN  dt=20250106  dt=20250101         5              merge (no cumulative delta built for these inputs)
region=CN  dt=20250107  dt=20250101         6              merge (no cumulative delta built for these inputs)
region=CN  dt=20250108  snapshot            -              snapshot
region=CN  dt=20250109  dt=20250108         1              merge (no cumulative delta built for these inputs)
region=CN  dt=20250110  dt=20250108         2              merge (no cumulative delta built for these inputs)
region=US  dt=20250101  snapshot            -              snapshot
region=US  dt=20250102  dt=20250101         1              merge (no cumulative delta built for these inputs)
region=US  dt=20250103  dt=20250101         2              merge (no cumulative delta built for these inputs)
region=US  dt=20250104  dt=20250101         3              merge (no cumulative delta built for these inputs)

compaction policy: none (compact_chain compacts the partition it is given)

expiration now (cutoff 2025-01-30 00:00:00) would drop:
  keep anchor snapshot region=CN/dt=20250108
  drop snapshot region=CN/dt=20250101 with region=CN/dt=20250102, region=CN/dt=20250103, region=CN/dt=20250104, region=CN/dt=20250105, region=CN/dt=20250106, region=CN/dt=20250107
