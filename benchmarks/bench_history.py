"""History by business day (README "History"): a day's changes and a downstream aggregate
maintained from them, against what the classic daily full snapshot offers, in one run.

    .venv/bin/python benchmarks/bench_history.py [--rows 2000000 --days 14 --rate 0.01]

bench_chain.py's change log and its two models (ods_chain, chain_incremental with its weekly
inline compaction, here with chain_store_changes; ods_full, the classic job storing every day's
full state) run day by day, beside ods_plain (ods_chain without chain_store_changes: what
storing the changes costs a run, and what chain_changes costs without them), with two
downstream models of the same aggregate (count and sum of amount by day and status):

  status_inc   the sample's orders_by_status (sample_project/models/ods), read from that file:
               each day is the previous day's aggregate plus chain_changes(prev, day), before
               images subtracted and after images added (day 1: the full day).
  status_full  the full daily recompute: the aggregate of the full day read through the view.

After each day's runs (day 1 excluded from every median):

  changes      chain_changes(ref('ods_chain'), d-1, d) as dbt renders it, read as a user would:
               count(*) and a checksum over all its columns, one query;
  plain        the same of ods_plain: the changes read from the branches;
  diff         the classic table's answer to the same question: a full outer join of its stored
               days d-1 and d on the key, keeping the keys that differ, in the same shape;
               equal count and checksum asserted;
  read         one stored day of the classic table: count and checksum over all columns;
  downstream   the wall time of `dbt run` of status_inc and of status_full (one invocation
               each, as a user's daily job; the goal's figure); beside it dbt's timing of
               the model alone (its cost inside a larger run, without dbt's start and
               catalog cache) and the executors' run seconds of its Spark stages (its compute
               on a cluster, without the driver's catalog round trips); equal rows asserted
               every day;
  runs         the wall time of each day's `dbt run` of ods_chain, ods_plain and ods_full.

Prints the ratios against GOALS and writes bench_history_n<rows>.json (with each day's three
queries) + .png into --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_chain import (
    SCHEMA,
    VALUE_COLS,
    chain_policy,
    compile_s,
    day_values,
    generate_source,
    inline_compaction_s,
    write_project,
)
from common import Dbt, fresh_root, median, ratio, require_matplotlib, start_spark

GOALS = {  # lower is better
    "changes_vs_read": 0.15,  # a day's changes against one stored day's read
    "downstream": 0.20,  # the incremental aggregate's daily run against its full recompute
}
SAMPLE_MODEL = (
    Path(__file__).resolve().parents[1] / "sample_project/models/ods/orders_by_status.sql"
)
COLS = ["id", *VALUE_COLS, "op", "seq", "dt"]  # the models' columns, in table order
DOWNSTREAM = ("downstream_node", "downstream_compute")  # beside the goal's wall time
TIMES = ("wall_s", "node_s", "executor_s", "executor_cpu_s")  # of each dbt invocation (common.Dbt)


def write_chains(proj: Path) -> None:
    """ods_chain stores its days' changes; ods_plain, the same model otherwise, does not."""
    chain = proj / "models" / "ods_chain.sql"
    text = chain.read_text()
    (proj / "models" / "ods_plain.sql").write_text(text)
    stored = text.replace(
        "    cumulative_delta=True,\n",
        "    cumulative_delta=True,\n    chain_store_changes=true,\n",
    )
    if stored == text:
        raise SystemExit(f"{chain} has no cumulative_delta line: adapt me")
    chain.write_text(stored)


def write_downstream(proj: Path) -> None:
    """status_inc: the sample's orders_by_status over ods_chain (its columns status and amount
    exist there too); status_full: the same aggregate recomputed from the full day each day."""
    text = SAMPLE_MODEL.read_text()
    if text.count("ref('ods_orders')") != 2:
        raise SystemExit(f"{SAMPLE_MODEL} no longer reads ref('ods_orders') twice: adapt me")
    (proj / "models" / "status_inc.sql").write_text(
        text.replace("ref('ods_orders')", "ref('ods_chain')")
    )
    (proj / "models" / "status_full.sql").write_text(
        "{{ config(materialized='incremental', incremental_strategy='insert_overwrite', "
        "partition_by=['dt'], file_format='parquet') }}\n"
        "select status, count(*) as orders, cast(sum(amount) as decimal(22, 2)) as amount, "
        "'{{ var('dt') }}' as dt\n"
        "from {{ ref('ods_chain') }}\n"
        "where dt = '{{ var('dt') }}'\n"
        "group by status\n"
    )


def checksum_sql(relation: str, cols: list[str], where: str = "") -> str:
    """count(*) and an order-free checksum over `cols` of `relation` (a table or subquery)."""
    return (
        f"SELECT count(*), sum(CAST(xxhash64({', '.join(cols)}) AS DECIMAL(38,0))) "
        f"FROM {relation}{where}"
    )


def diff_sql(prev: str, day: str) -> str:
    """The classic table's changes from `prev` to `day`, shaped as chain_changes' rows: the
    state on `day` (a delete: on `prev`) with dt = day, ct__change, ct__before (the state on
    `prev` as a struct, null for an insert); only keys whose columns differ."""
    table = f"{SCHEMA}.ods_full"
    values = [c for c in COLS if c not in ("id", "dt")]
    out = [f"CASE WHEN n.id IS NOT NULL THEN n.{c} ELSE o.{c} END AS {c}" for c in COLS[:-1]]
    before = ", ".join(f"'{c}', o.{c}" for c in COLS)
    same = " AND ".join(f"n.{c} <=> o.{c}" for c in values)
    return (
        f"SELECT {', '.join(out)}, '{day}' AS dt,\n"
        "  CASE WHEN o.id IS NULL THEN 'insert' WHEN n.id IS NULL THEN 'delete' "
        "ELSE 'update' END AS ct__change,\n"
        f"  CASE WHEN o.id IS NOT NULL THEN named_struct({before}) END AS ct__before\n"
        f"FROM (SELECT * FROM {table} WHERE dt = '{day}') n\n"
        f"FULL OUTER JOIN (SELECT * FROM {table} WHERE dt = '{prev}') o ON n.id = o.id\n"
        f"WHERE n.id IS NULL OR o.id IS NULL OR NOT ({same})"
    )


def timed_reads(spark, queries: dict[str, str], repeats: int) -> dict[str, dict[str, Any]]:
    """Each query once untimed (warm-up, its result kept), then `repeats` rounds running every
    query once, each round in another order (as bench_chain's read_days), so that drift falls on
    every side alike; the median of each. A result that changes between runs fails the run."""
    labels = list(queries)
    results = {k: tuple(spark.sql(queries[k]).collect()[0]) for k in labels}
    times: dict[str, list[float]] = {k: [] for k in labels}
    for i in range(repeats):
        for k in labels[i % len(labels) :] + labels[: i % len(labels)]:
            t0 = time.perf_counter()
            again = tuple(spark.sql(queries[k]).collect()[0])
            times[k].append(time.perf_counter() - t0)
            if again != results[k]:
                raise SystemExit(f"{k}: non-deterministic result {again} vs {results[k]}")
    return {
        k: {
            "rows": int(results[k][0]),
            "checksum": str(results[k][1]),
            "times_s": times[k],
            "median_s": median(times[k]),
        }
        for k in labels
    }


def measure_changes(spark, dbt: Dbt, prev: str, day: str, repeats: int) -> dict[str, Any]:
    """changes, plain, diff and read of `day` (timed_reads); changes, plain and diff must
    agree, and changes must have read the stored changes (but on a compaction day, whose
    state the compaction wrote: not stored, read from the branches)."""

    def changes_of(model: str) -> str:
        return dbt.compile_inline(
            f"select * from {{{{ chain_changes(ref('{model}'), {{'dt': '{prev}'}}, "
            f"{{'dt': '{day}'}}) }}}} __c"
        )

    stored, plain = changes_of("ods_chain"), changes_of("ods_plain")
    shape = [*COLS, "ct__change", "ct__before"]
    queries = {
        "changes": checksum_sql(f"({stored}) __changes", shape),
        "plain": checksum_sql(f"({plain}) __changes", shape),
        "diff": checksum_sql(f"({diff_sql(prev, day)}) __diff", shape),
        "read": checksum_sql(f"{SCHEMA}.ods_full", COLS, f" WHERE dt = '{day}'"),
    }
    got: dict[str, Any] = timed_reads(spark, queries, repeats)
    b = got["diff"]
    for k in ("changes", "plain"):
        a = got[k]
        if (a["rows"], a["checksum"]) != (b["rows"], b["checksum"]):
            raise SystemExit(
                f"chain_changes {prev}->{day} ({k}): {a['rows']} rows {a['checksum']}, the "
                f"classic diff {b['rows']} rows {b['checksum']}"
            )
    return {**got, "sql": queries, "read_stored": f"{SCHEMA}.ods_chain__changes" in stored}


def downstream_rows(spark, model: str, day: str) -> list[tuple[Any, ...]]:
    return [
        tuple(r)
        for r in spark.sql(
            f"SELECT status, orders, amount FROM {SCHEMA}.{model} WHERE dt = '{day}' "
            "ORDER BY status"
        ).collect()
    ]


def run_day(
    spark, dbt: Dbt, days: list[str], i: int, repeats: int, log: dict[str, list[Any]]
) -> None:
    """Day i: the two ODS models, then the two downstream ones (each pair in alternating
    order), then, after day 1, the changes' reads; appended to `log`, one line printed."""
    day = days[i]
    vars_ = {"dt": day, "prev_dt": days[i - 1] if i else day}
    dbt.invoke("parse", vars=vars_)  # untimed: new vars re-parse the project (bench_chain)
    line = [f"day {i + 1:2d} {day}"]
    flip = (lambda xs: xs) if i % 2 == 0 else (lambda xs: xs[::-1])
    compacted = None
    order = ["ods_full", "ods_chain", "ods_plain"]
    for model in order[i % 3 :] + order[: i % 3]:
        r = dbt.invoke("run", "--select", model, vars=vars_)
        log["ods"].append({"day": day, "model": model, "jvm": r["jvm"], **{k: r[k] for k in TIMES}})
        line.append(f"{model} {r['wall_s']:.1f} s")
        if model == "ods_chain":
            compacted = inline_compaction_s(dbt.messages)
    for model in flip(["status_inc", "status_full"]):
        r = dbt.invoke("run", "--select", model, vars=vars_)
        log["downstream"].append(
            {
                "day": day,
                "model": model,
                "statements": r["statements"],
                "jvm": r["jvm"],
                **{k: r[k] for k in TIMES},
            }
        )
        line.append(f"{model} {r['wall_s']:.2f} s (jit+codegen {compile_s(r):.1f} s)")
    inc, full = (
        downstream_rows(spark, "status_inc", day),
        downstream_rows(spark, "status_full", day),
    )
    if inc != full or not full:
        raise SystemExit(f"status_inc on {day}: {inc}\n  differs from status_full: {full}")
    if compacted is not None:
        log["compact_days"].append(day)
        line.append(f"(compacted inline in {compacted:.1f} s)")
    if i:
        got = measure_changes(spark, dbt, days[i - 1], day, repeats)
        if compacted is None and not got["read_stored"]:
            raise SystemExit(f"chain_changes {days[i - 1]}->{day} did not read the stored changes")
        log["changes"].append({"day": day, "compacted": compacted is not None, **got})
        line.append(
            f"changes {got['changes']['median_s']:.2f} s ({got['changes']['rows']} rows"
            f"{', stored' if got['read_stored'] else ''}) plain {got['plain']['median_s']:.2f} s "
            f"diff {got['diff']['median_s']:.2f} s read {got['read']['median_s']:.2f} s"
        )
    print("  ".join(line), flush=True)


def summarize(log: dict[str, list[Any]]) -> dict[str, Any]:
    """Per day (2..D) the seconds of each side and the ratios; medians over the ordinary days
    and, apart, over the days whose chain run compacted."""
    runs = {(r["day"], r["model"]): r for r in log["downstream"] + log["ods"]}
    walls = {k: r["wall_s"] for k, r in runs.items()}
    per_day = []
    for c in log["changes"]:
        d = c["day"]
        inc, full = walls[(d, "status_inc")], walls[(d, "status_full")]
        chain, plain = walls[(d, "ods_chain")], walls[(d, "ods_plain")]
        per_day.append(
            {
                "day": d,
                "compacted": c["compacted"],
                "read_stored": c["read_stored"],
                "changes_s": c["changes"]["median_s"],
                "plain_s": c["plain"]["median_s"],
                "diff_s": c["diff"]["median_s"],
                "read_s": c["read"]["median_s"],
                "change_rows": c["changes"]["rows"],
                "read_rows": c["read"]["rows"],
                "incremental_s": inc,
                "recompute_s": full,
                "chain_run_s": chain,
                "plain_run_s": plain,
                "classic_run_s": walls[(d, "ods_full")],
                "changes_vs_read": ratio(c["changes"]["median_s"], c["read"]["median_s"]),
                "plain_vs_read": ratio(c["plain"]["median_s"], c["read"]["median_s"]),
                "store_run_cost": ratio(chain, plain),
                "changes_vs_diff": ratio(c["changes"]["median_s"], c["diff"]["median_s"]),
                "downstream": ratio(inc, full),
                "incremental_node_s": runs[(d, "status_inc")]["node_s"],
                "recompute_node_s": runs[(d, "status_full")]["node_s"],
                "incremental_executor_s": runs[(d, "status_inc")]["executor_s"],
                "recompute_executor_s": runs[(d, "status_full")]["executor_s"],
                "downstream_node": ratio(
                    runs[(d, "status_inc")]["node_s"], runs[(d, "status_full")]["node_s"]
                ),
                "downstream_compute": ratio(
                    runs[(d, "status_inc")]["executor_s"], runs[(d, "status_full")]["executor_s"]
                ),
            }
        )

    def medians(rows: list[dict[str, Any]]) -> dict[str, float] | None:
        if not rows:
            return None
        extra = ("changes_vs_diff", "plain_vs_read", "store_run_cost", *GOALS, *DOWNSTREAM)
        keys = [k for k in rows[0] if k.endswith("_s") or k in extra]
        return {k: median([r[k] for r in rows]) for k in keys}

    return {
        "per_day": per_day,
        "ordinary": medians([p for p in per_day if not p["compacted"]]),
        "compaction_days": medians([p for p in per_day if p["compacted"]]),
    }


def print_table(res: dict[str, Any]) -> None:
    print()
    print(f"{'figure (median over days 2..D)':58s} {'measured':>10s}  goal")
    for label, which in (("", "ordinary"), ("compaction days: ", "compaction_days")):
        m = res["summary"][which]
        if m is None:
            continue
        rows = [
            (
                f"{label}changes / one stored day's read",
                m["changes_vs_read"],
                "changes_vs_read",
                f"{m['changes_s']:.2f} s vs {m['read_s']:.2f} s",
            ),
            (
                f"{label}  without stored changes",
                m["plain_vs_read"],
                None,
                f"{m['plain_s']:.2f} s",
            ),
            (f"{label}changes / full diff", m["changes_vs_diff"], None, f"{m['diff_s']:.2f} s"),
            (
                f"{label}downstream incremental / recompute",
                m["downstream"],
                "downstream",
                f"{m['incremental_s']:.2f} s vs {m['recompute_s']:.2f} s",
            ),
            (
                f"{label}  its model in dbt's timing",
                m["downstream_node"],
                None,
                f"{m['incremental_node_s']:.2f} s vs {m['recompute_node_s']:.2f} s",
            ),
            (
                f"{label}  its compute (executor seconds)",
                m["downstream_compute"],
                None,
                f"{m['incremental_executor_s']:.2f} s vs {m['recompute_executor_s']:.2f} s",
            ),
            (
                f"{label}chain run storing its changes / without",
                m["store_run_cost"],
                None,
                f"{m['chain_run_s']:.2f} s vs {m['plain_run_s']:.2f} s; "
                f"classic {m['classic_run_s']:.2f} s",
            ),
        ]
        for name, x, key, detail in rows:
            goal = ""
            if key is not None and which == "ordinary":
                g = res["goals"][key]
                goal = f"{g['goal']:7s} {'met' if g['met'] else 'not met'}"
            print(f"{name:58s} {x:10.3f}  {goal:20s} ({detail})")
    print()


def chart(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_day = res["summary"]["per_day"]
    xs = [p["day"][4:] for p in per_day]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    for key, style, label in (
        ("changes_s", "s-", "chain_changes(d-1, d), changes stored"),
        ("plain_s", "d-", "chain_changes(d-1, d), from the branches"),
        ("diff_s", "o-", "classic: full diff of two stored days"),
        ("read_s", "^-", "classic: one stored day's read"),
    ):
        ax1.plot(xs, [p[key] for p in per_day], style, label=label)
    ax1.set_ylabel("seconds (median of the rounds)")
    ax1.set_title("a day's changes: count + checksum over all columns")
    for key, style, label in (
        ("incremental_s", "s-", "incremental from chain_changes"),
        ("recompute_s", "o-", "full recompute from the view"),
    ):
        ax2.plot(xs, [p[key] for p in per_day], style, label=label)
    ax2.set_ylabel("dbt run wall time (s)")
    ax2.set_title("downstream aggregate by day and status")
    p = res["params"]
    for ax in (ax1, ax2):
        for d in p["compact_days"]:
            ax.axvline(d[4:], color="grey", lw=0.8, ls="--")
        ax.set_xlabel(f"day (MMDD; dashed: compaction)  N={p['rows']:,} r={p['rate']}")
        ax.tick_params(axis="x", rotation=60)
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--compact-every", type=int, default=7, help="as bench_chain.py's")
    ap.add_argument("--read-repeats", type=int, default=3, help="timed rounds of a day's reads")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    args = ap.parse_args()
    require_matplotlib(ap)

    out = Path(args.out).resolve()
    root = fresh_root(out, f"history_n{args.rows}_d{args.days}")
    days = day_values(args.days)
    t_all = time.perf_counter()
    spark = start_spark(root, args.driver_memory)
    print(f"generating {args.rows} rows x {args.days} days, rate {args.rate} ...", flush=True)
    src_counts = generate_source(spark, args.rows, days, args.rate, 1)
    proj = write_project(root, 1, "window", chain_policy(args.compact_every))
    write_chains(proj)
    write_downstream(proj)
    dbt = Dbt(proj, spark)
    dbt.invoke("parse")  # loads dbt and the adapter: not part of any day
    log: dict[str, list[Any]] = {"ods": [], "downstream": [], "changes": [], "compact_days": []}
    for i in range(len(days)):
        run_day(spark, dbt, days, i, args.read_repeats, log)
    summary = summarize(log)
    m = summary["ordinary"] or {}
    result = {
        "params": {
            **vars(args),
            "out": str(out),
            "days_list": days,
            "compact_days": log["compact_days"],
            "source_rows_per_day": src_counts,
        },
        "summary": summary,
        "goals": {
            k: {"goal": f"<= {g}", "limit": g, "measured": m.get(k), "met": m.get(k, g + 1) <= g}
            for k, g in GOALS.items()
        },
        "changes": log["changes"],
        "downstream_runs": log["downstream"],
        "ods_runs": log["ods"],
        "total_s": time.perf_counter() - t_all,
    }
    print_table(result)
    name = f"bench_history_n{args.rows}"
    (out / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
    chart(result, out / f"{name}.png")
    print(f"wrote {out / name}.json and .png ({result['total_s']:.0f} s in all)")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
