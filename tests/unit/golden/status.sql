group      snapshots  deltas  latest snapshot  chain length
---------  ---------  ------  ---------------  ------------
region=CN  2          9       dt=20250108      2
region=US  1          3       dt=20250101      3

group      partition    read from (anchor)  deltas merged
---------  -----------  ------------------  -------------
region=CN  dt=20250101  snapshot            -
region=CN  dt=20250102  dt=20250101         1
region=CN  dt=20250103  dt=20250101         2
region=CN  dt=20250104  dt=20250101         3
region=CN  dt=20250105  dt=20250101         4
region=CN  dt=20250106  dt=20250101         5
region=CN  dt=20250107  dt=20250101         6
region=CN  dt=20250108  snapshot            -
region=CN  dt=20250109  dt=20250108         1
region=CN  dt=20250110  dt=20250108         2
region=US  dt=20250101  snapshot            -
region=US  dt=20250102  dt=20250101         1
region=US  dt=20250103  dt=20250101         2
region=US  dt=20250104  dt=20250101         3

expiration now (cutoff 2025-01-30 00:00:00) would drop:
  keep anchor snapshot region=CN/dt=20250108
  drop snapshot region=CN/dt=20250101 with region=CN/dt=20250102, region=CN/dt=20250103, region=CN/dt=20250104, region=CN/dt=20250105, region=CN/dt=20250106, region=CN/dt=20250107
