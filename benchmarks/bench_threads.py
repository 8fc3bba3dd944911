"""Eight chain models against eight classic models, each set run with `--threads 1` and
`--threads 4`, side by side in one run.

    .venv/bin/python benchmarks/bench_threads.py [--rows 200000 --days 4 --models 8]

One SparkSession in this process (dbt's session method shares it), one synthetic ODS change
log (bench_chain.py's: day 1 the full export, later days 1 % updates, deletes and inserts), and
`--models` copies of each of bench_chain.py's two models over it: `c<i>` (chain_incremental,
compaction policy max_chain_length 7) and `f<i>` (the classic job: yesterday's full partition
merged with today's changes into today's). For each thread count, a fresh catalog: day 1 for
all models, then each later day one `dbt run` of the chain models and one of the classic models,
timed (wall seconds of the invocation). Prints the median daily wall time of each set per thread
count, the chain/classic ratio and the threads-4/threads-1 ratio; writes
benchmarks/results/bench_threads_n<rows>.json (--out for elsewhere).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from itertools import pairwise
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_chain import chain_policy, day_values, generate_source, write_project  # noqa: E402
from common import Dbt, fresh_root, median, ratio, start_spark  # noqa: E402


def copies(proj: Path, models: int) -> tuple[list[str], list[str]]:
    """`models` copies of ods_chain (c1..) and ods_full (f1..); the originals removed."""
    chain = (proj / "models" / "ods_chain.sql").read_text()
    full = (proj / "models" / "ods_full.sql").read_text()
    for i in range(1, models + 1):
        (proj / "models" / f"c{i}.sql").write_text(chain)
        (proj / "models" / f"f{i}.sql").write_text(full)
    (proj / "models" / "ods_chain.sql").unlink()
    (proj / "models" / "ods_full.sql").unlink()
    return [f"c{i}" for i in range(1, models + 1)], [f"f{i}" for i in range(1, models + 1)]


def run_days(out: Path, spark_holder: dict, args, threads: int) -> dict[str, list[float]]:
    root = fresh_root(out, f"threads{threads}")
    if "spark" not in spark_holder:
        spark_holder["spark"] = start_spark(root)
    spark = spark_holder["spark"]
    days = day_values(args.days)
    spark.sql("DROP DATABASE IF EXISTS bench CASCADE")
    spark.sql("DROP DATABASE IF EXISTS bench_src CASCADE")
    generate_source(spark, args.rows, days, 0.01, 1)
    proj = write_project(root, groups=1, baseline_sql="anti", policy=chain_policy(7))
    # the profile points at this run's root, the session at the first run's: same catalog
    prof = json.loads((proj / "profiles.yml").read_text())
    params = prof["chain_bench"]["outputs"]["bench"]["server_side_parameters"]
    first = spark.conf.get("spark.sql.warehouse.dir")
    params["spark.sql.warehouse.dir"] = first
    params["spark.hadoop.javax.jdo.option.ConnectionURL"] = spark.conf.get(
        "spark.hadoop.javax.jdo.option.ConnectionURL"
    )
    (proj / "profiles.yml").write_text(json.dumps(prof))
    chains, classics = copies(proj, args.models)
    dbt = Dbt(proj, spark)
    t = ["--threads", str(threads)]
    dbt.invoke("run", *t, vars={"dt": days[0], "prev_dt": days[0]})
    walls: dict[str, list[float]] = {"chain": [], "classic": []}
    for prev, day in pairwise(days):
        v = {"dt": day, "prev_dt": prev}
        walls["chain"].append(dbt.invoke("run", *t, "-s", *chains, vars=v)["wall_s"])
        walls["classic"].append(dbt.invoke("run", *t, "-s", *classics, vars=v)["wall_s"])
        print(
            f"  threads {threads} day {day}: chain {walls['chain'][-1]:.1f} s, "
            f"classic {walls['classic'][-1]:.1f} s",
            flush=True,
        )
    shutil.rmtree(proj, ignore_errors=True)
    return walls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("/tmp/chaintable-bench-threads"))
    args = ap.parse_args()
    holder: dict = {}
    res: dict = {"params": vars(args) | {"out": str(args.out)}}
    for threads in (1, 4):
        walls = run_days(args.out, holder, args, threads)
        res[f"threads{threads}"] = {
            "daily_wall_s": walls,
            "chain_median_s": median(walls["chain"]),
            "classic_median_s": median(walls["classic"]),
        }
    t1, t4 = res["threads1"], res["threads4"]
    res["ratios"] = {
        "chain_over_classic_threads1": ratio(t1["chain_median_s"], t1["classic_median_s"]),
        "chain_over_classic_threads4": ratio(t4["chain_median_s"], t4["classic_median_s"]),
        "chain_threads4_over_threads1": ratio(t4["chain_median_s"], t1["chain_median_s"]),
        "classic_threads4_over_threads1": ratio(t4["classic_median_s"], t1["classic_median_s"]),
    }
    print(f"\n{args.models} chain models vs {args.models} classic models, {args.rows} rows each")
    print("               chain (s)  classic (s)  chain/classic")
    for threads in (1, 4):
        r = res[f"threads{threads}"]
        print(
            f"threads {threads}:  {r['chain_median_s']:9.2f}  {r['classic_median_s']:11.2f}  "
            f"{res['ratios'][f'chain_over_classic_threads{threads}']:13.2f}"
        )
    print(
        f"threads 4 / threads 1: chain {res['ratios']['chain_threads4_over_threads1']:.2f}, "
        f"classic {res['ratios']['classic_threads4_over_threads1']:.2f}"
    )
    target = HERE / "results" / f"bench_threads_n{args.rows}.json"
    target.write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
