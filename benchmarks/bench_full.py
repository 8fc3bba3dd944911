"""A chain fed by daily full extracts (chain_input='full') vs the classic job, side by side.

    .venv/bin/python benchmarks/bench_full.py [--rows 2000000 --days 14 --rate 0.01]

Before each day, outside both timings, the benchmark writes that day's full extract (a plain
parquet table, bench_src.daily_extract, holding the day only): day 1 has `rows` keys; each later day
changes `rate` of them (60 % updated, 20 % deleted, 20 % new keys), deterministically by key
and day. Two dbt models of one project read it, run day by day in this process (dbtRunner,
method: session), in alternating order:

  ods_full   the classic job: incremental, insert_overwrite, partitioned by dt; each day's
             partition is the day's extract as it is.
  ods_chain  chain_incremental, chain_input='full': each day stores what differs from the day
             before (inserts, updates, deletes); a snapshot a week (chain_compaction
             max_chain_length 7, inline), as bench_chain.py.

Measured: bytes on disk after the last day (the chain: all its tables), each daily run's wall
time (day 1, the first load, apart; the runs that compacted apart), and reads of the newest day
(count + checksum over every column, equal results asserted) through the chain's view and the
classic partition. Prints chain/classic ratios; writes bench_full_n<rows>.json + .png to --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_chain import chain_policy, day_values, inline_compaction_s
from common import (
    Dbt,
    dir_bytes,
    fresh_root,
    median,
    provenance,
    ratio,
    require_matplotlib,
    session_params,
    start_spark,
    table_location,
)

SCHEMA, SRC = "bench", "bench_src"
COLS = ["id", "name", "status", "amount", "qty", "note"]
GOALS = {"storage": 0.20, "daily_run": 0.8, "read_new_day": 1.20}  # chain / classic, at 10M
CHAIN_TABLES = ["ods_chain__snapshot", "ods_chain__delta", "ods_chain__cumulative"]


def extract_sql(rows: int, k: int, rate: float, day: str) -> str:
    """Day k's (0-based) full state: the keys present, each with values of its version (the
    number of updates it had up to day k). A key is updated on day j with probability 0.6 *
    rate, deleted (for good) with 0.2 * rate; 0.2 * rate * rows new keys come each day."""
    per_mille = [round(rate * 1000 * f, 6) for f in (0.6, 0.2)]
    new = int(rows * rate * 0.2)

    def hit(j: int, salt: int, share: float) -> str:
        return f"pmod(xxhash64(id, {j}, {salt}), 1000000) < {int(share * 1000)}"

    version = " + ".join([f"CAST({hit(j, 1, per_mille[0])} AS INT)" for j in range(1, k + 1)])
    deleted = " OR ".join([hit(j, 2, per_mille[1]) for j in range(1, k + 1)]) or "false"
    born = f"CASE WHEN id < {rows} THEN 0 ELSE CAST(floor((id - {rows}) / {max(new, 1)}) AS INT) + 1 END"
    return textwrap.dedent(f"""\
        SELECT id, concat('n', pmod(id, 9973), '_', v) AS name,
               element_at(array('new', 'open', 'paid', 'closed'), CAST(pmod(id + v, 4) AS INT) + 1) AS status,
               CAST(pmod(id * 31 + v * 7, 100000) AS DOUBLE) / 100 AS amount,
               CAST(pmod(id + v, 50) AS INT) AS qty,
               concat('note of ', id, ' v', v) AS note, '{day}' AS dt
        FROM (SELECT id, {version or "0"} AS v, {born} AS born FROM range({rows + new * k})) __k
        WHERE born <= {k} AND NOT ({deleted})""")


def write_project(root: Path) -> Path:
    proj = root / "project"
    (proj / "models").mkdir(parents=True)
    (proj / "dbt_project.yml").write_text(
        "name: full_bench\nversion: '1.0'\nconfig-version: 2\nprofile: full_bench\n"
        "model-paths: [models]\n"
    )
    output = {
        "type": "chaintable",
        "method": "session",
        "host": "localhost",
        "schema": SCHEMA,
        "server_side_parameters": session_params(root),
    }
    (proj / "profiles.yml").write_text(
        json.dumps({"full_bench": {"target": "bench", "outputs": {"bench": output}}})
    )
    (proj / "models" / "sources.yml").write_text(
        f"version: 2\nsources:\n  - name: src\n    schema: {SRC}\n    tables: [{{name: daily_extract}}]\n"
    )
    select = (
        f"select {', '.join(COLS)}, dt from {{{{ source('src', 'daily_extract') }}}}\n"
        "where dt = '{{ var(\"dt\") }}'\n"
    )
    (proj / "models" / "ods_chain.sql").write_text(
        "{{ config(materialized='chain_incremental', partition_by=['dt'], "
        "chain_partition_keys=['dt'], primary_key=['id', 'dt'], chain_input='full', "
        f"chain_partition={{'dt': var('dt')}}, chain_compaction={chain_policy(7)}) }}}}\n" + select
    )
    (proj / "models" / "ods_full.sql").write_text(
        "{{ config(materialized='incremental', incremental_strategy='insert_overwrite', "
        "partition_by=['dt'], file_format='parquet') }}\n" + select
    )
    return proj


def read_day(spark, day: str, repeats: int) -> dict[str, Any]:
    """count(*) and a checksum of `day` through the chain's view and the classic table, read
    alternately after one untimed read each; the results must be equal."""
    cols = ", ".join([*COLS, "dt"])
    sql = {
        t: f"SELECT count(*), sum(CAST(xxhash64({cols}) AS DECIMAL(38,0))) "
        f"FROM {SCHEMA}.{t} WHERE dt = '{day}'"
        for t in ("ods_chain", "ods_full")
    }
    first = {t: tuple(spark.sql(s).collect()[0]) for t, s in sql.items()}
    assert first["ods_chain"] == first["ods_full"], f"{day}: the chain reads {first}"
    times: dict[str, list[float]] = {t: [] for t in sql}
    for i in range(repeats):
        for t in list(sql)[i % 2 :] + list(sql)[: i % 2]:
            t0 = time.perf_counter()
            spark.sql(sql[t]).collect()
            times[t].append(time.perf_counter() - t0)
    return {"rows": int(first["ods_full"][0]), "times_s": times}


def run_days(spark, dbt: Dbt, days: list[str], rows: int, rate: float) -> dict[str, Any]:
    runs: dict[str, dict[str, float]] = {"ods_full": {}, "ods_chain": {}}
    compacted: dict[str, float] = {}
    extract_s = []
    for k, day in enumerate(days):
        t0 = time.perf_counter()
        spark.sql(extract_sql(rows, k, rate, day)).write.mode("overwrite").saveAsTable(
            f"{SRC}.daily_extract"
        )
        extract_s.append(time.perf_counter() - t0)
        order = ["ods_full", "ods_chain"] if k % 2 == 0 else ["ods_chain", "ods_full"]
        for model in order:
            out = dbt.invoke("run", "--select", model, vars={"dt": day})
            runs[model][day] = out["wall_s"]
            if model == "ods_chain" and (c := inline_compaction_s(dbt.messages)) is not None:
                compacted[day] = c
        print(
            f"{day}: classic {runs['ods_full'][day]:.1f} s, chain {runs['ods_chain'][day]:.1f} s"
            + (f" (compacted in {compacted[day]:.1f} s)" if day in compacted else ""),
            flush=True,
        )
    return {"runs": runs, "compacted": compacted, "extract_s": extract_s}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--read-repeats", type=int, default=7)
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    args = ap.parse_args()
    require_matplotlib(ap)
    t_start = time.perf_counter()
    out = Path(args.out)
    root = fresh_root(out, f"full_n{args.rows}")
    spark = start_spark(root, args.driver_memory)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {SRC}")
    dbt = Dbt(write_project(root), spark)
    days = day_values(args.days)
    measured = run_days(spark, dbt, days, args.rows, args.rate)
    reads = read_day(spark, days[-1], args.read_repeats)
    size = {
        "classic": dir_bytes(table_location(spark, f"{SCHEMA}.ods_full")),
        "chain": sum(dir_bytes(table_location(spark, f"{SCHEMA}.{t}")) for t in CHAIN_TABLES),
    }
    res = summarise(args, days, measured, reads, size)
    res["total_s"] = time.perf_counter() - t_start
    res["provenance"] = provenance()
    path = out / f"bench_full_n{args.rows}.json"
    path.write_text(json.dumps(res, indent=2))
    chart(res, path.with_suffix(".png"))
    print(json.dumps({k: res[k] for k in ("ratios", "goals")}, indent=2))
    print(f"wrote {path}")
    return 0


def summarise(args, days, measured, reads, size) -> dict[str, Any]:
    runs, compacted = measured["runs"], measured["compacted"]
    later = [d for d in days[1:] if d not in compacted]
    daily = {m: median([runs[m][d] for d in later]) for m in runs}
    read = {t: median(v) for t, v in reads["times_s"].items()}
    ratios = {
        "storage": ratio(size["chain"], size["classic"]),
        "daily_run": ratio(daily["ods_chain"], daily["ods_full"]),
        "first_load": ratio(runs["ods_chain"][days[0]], runs["ods_full"][days[0]]),
        "read_new_day": ratio(read["ods_chain"], read["ods_full"]),
    }
    goals = (
        {k: {"limit": v, "measured": ratios[k], "met": ratios[k] <= v} for k, v in GOALS.items()}
        if args.rows == 10_000_000
        else {}
    )
    return {
        "params": {**vars(args), "days_list": days},
        "bytes": size,
        "daily_runs": runs,
        "daily_run_median_s": daily,
        "compactions_s": compacted,
        "extract_s": measured["extract_s"],
        "read_new_day": {"day": days[-1], "rows": reads["rows"], "median_s": read},
        "ratios": ratios,
        "goals": goals,
    }


def chart(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(res["ratios"])
    values = [res["ratios"][k] for k in names]
    colors = [
        ("tab:green" if res["goals"][k]["met"] else "tab:red") if k in res["goals"] else "grey"
        for k in names
    ]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(names, values, color=colors)
    for k, v in zip(names, values, strict=True):
        ax.annotate(f"{v:.2f}", (k, v), ha="center", va="bottom")
        if k in res["goals"]:
            ax.hlines(res["goals"][k]["limit"], names.index(k) - 0.4, names.index(k) + 0.4, "k")
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set_ylabel("chain / classic")
    p = res["params"]
    ax.set_title(f"chain_input='full': {p['rows']:,} rows, {p['days']} days, {p['rate']:.0%} a day")
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    sys.exit(main())
