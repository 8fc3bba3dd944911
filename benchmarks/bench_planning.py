"""How planning cost grows with history: 200 / 2,000 / 20,000 partitions (10 groups).

    .venv/bin/python benchmarks/bench_planning.py [--groups 10 --levels 10,100,1000]

A chain table `hist` (partition_by region, dt; one chain per region) is created by a dbt run,
then its history is extended with empty partitions (ALTER TABLE ... ADD PARTITION in batches)
to `level` days per region; the size reported is the number of partitions of both branches
(10 groups x 1,000 days x snapshot + delta = 20,000). Two histories:

  compacted  every day has a snapshot partition except the last 6 (and every day its delta:
             compaction never removes deltas). The view holds the snapshot branch plus 6 merged
             branches: planning a one-partition query must not grow with the history.
  weekly     a snapshot every 7th day, a delta every day: the newest 7 delta-only days get a
             merged branch each, older ones are read through the mapping table, so the view
             must not grow with the history (measured at --weekly-levels).

At each level: one daily `dbt run` of the next day (wall time; the catalog statements, planner
and CREATE OR REPLACE VIEW it issues, from dbt's SQL events), the adapter's pure planner on the
listed partitions, and the optimizer on `select * from hist where region=.. and dt=..` for a
compacted day and for the latest (delta-only) day. Prints a table with growth factors and writes
bench_planning.json and bench_planning.png (seconds against partitions, log-log) into --out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    Dbt,
    fresh_root,
    median,
    require_matplotlib,
    session_params,
    start_spark,
    table_columns,
)

SCHEMA = "plan"
CATALOG_KINDS = (
    "SHOW PARTITIONS",
    "SHOW TBLPROPERTIES",
    "SHOW TABLES",
    "SHOW TABLE EXTENDED",
    "DESCRIBE TABLE",
    "DESCRIBE FORMATTED",
    "DESCRIBE QUERY",
)
END = dt.date(2030, 1, 1)  # history grows backwards from here; the daily run writes END + 1


def day(offset: int) -> str:
    return (END + dt.timedelta(days=offset)).strftime("%Y%m%d")


def write_project(root: Path, groups: int) -> Path:
    proj = root / "project"
    (proj / "models").mkdir(parents=True)
    (proj / "dbt_project.yml").write_text(
        textwrap.dedent("""\
        name: plan_bench
        version: '1.0'
        config-version: 2
        profile: plan_bench
        model-paths: [models]
        """)
    )
    output = {
        "type": "chaintable",
        "method": "session",
        "host": "localhost",
        "schema": SCHEMA,
        "server_side_parameters": session_params(root, "4g"),
    }
    (proj / "profiles.yml").write_text(
        json.dumps({"plan_bench": {"target": "b", "outputs": {"b": output}}})
    )
    (proj / "models" / "hist.sql").write_text(
        textwrap.dedent(f"""\
        {{{{ config(
            materialized='chain_incremental',
            partition_by=['region', 'dt'],
            chain_partition_keys=['dt'],
            primary_key=['id', 'region', 'dt'],
            sequence_field='seq',
            rowkind_field='op',
            chain_partition={{'dt': var('dt')}},
        ) }}}}
        select id, concat('v', id) as v, '+I' as op, cast(id as bigint) + {{{{ var('seq') }}}} as seq,
               concat('r', lpad(cast(pmod(id, {groups}) as string), 2, '0')) as region,
               '{{{{ var("dt") }}}}' as dt
        from (select explode(sequence(1, {groups * 3})) as id) t
        """)
    )
    return proj


def add_partitions(spark, table: str, parts: list[tuple], batch: int = 200) -> float:
    t0 = time.perf_counter()
    for i in range(0, len(parts), batch):
        specs = " ".join(f"PARTITION (region = '{r}', dt = '{d}')" for r, d in parts[i : i + batch])
        spark.sql(f"ALTER TABLE {SCHEMA}.{table} ADD IF NOT EXISTS {specs}")
    return time.perf_counter() - t0


def plan_time(spark, sql: str, repeats: int = 3) -> dict[str, float]:
    """Parse + analysis + optimization (optimizedPlan), and through physical planning
    (executedPlan), of a fresh DataFrame each time; medians."""
    ana, opt, phys = [], [], []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        df = spark.sql(sql)  # parsed and analyzed (the view expanded and resolved)
        ta = time.perf_counter()
        qe = df._jdf.queryExecution()
        qe.optimizedPlan()
        t1 = time.perf_counter()
        qe.executedPlan()
        t2 = time.perf_counter()
        ana.append(ta - t0)
        opt.append(t1 - t0)
        phys.append(t2 - t0)
    return {
        "analyzed_s": median(ana[1:]),
        "optimized_s": median(opt[1:]),  # first: warm-up
        "physical_s": median(phys[1:]),
    }


def pure_planner(spark) -> dict[str, Any]:
    """What the adapter's Catalog.load + planner + renderer do for one view refresh, timed in parts:
    catalog listing (through this SparkSession) and the pure Python planning."""
    from dbt.adapters.chaintable.base.keys import DEFAULT_VIEW_RECENT, P_VIEW_RECENT
    from dbt.adapters.chaintable.base.options import ChainOptions
    from dbt.adapters.chaintable.base.partitions import parse_partition_path
    from dbt.adapters.chaintable.chain.state import ChainState
    from dbt.adapters.chaintable.view.layout import view_layout
    from dbt.adapters.chaintable.view.sql import ViewSql

    snap, delta = f"{SCHEMA}.hist__snapshot", f"{SCHEMA}.hist__delta"
    t0 = time.perf_counter()
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {snap}").collect()}
    cols = table_columns(spark, snap)
    sp = [r[0] for r in spark.sql(f"SHOW PARTITIONS {snap}").collect()]
    dp = [r[0] for r in spark.sql(f"SHOW PARTITIONS {delta}").collect()]
    t1 = time.perf_counter()
    opts = ChainOptions.from_properties(snap, props)
    state = ChainState.build(
        opts,
        [parse_partition_path(p, opts.partition_by) for p in sp],
        [parse_partition_path(p, opts.partition_by) for p in dp],
        dict(cols),
    )
    recent = int(props.get(P_VIEW_RECENT) or DEFAULT_VIEW_RECENT)  # as ViewWriter.refresh
    view_sql = ViewSql(opts, [c for c, _ in cols], dict(cols), snap, delta).view(
        view_layout(state, recent), (f"{SCHEMA}.hist__chain_map", "bench")
    )
    t2 = time.perf_counter()
    return {
        "catalog_s": t1 - t0,
        "planner_s": t2 - t1,
        "snapshot_partitions": len(sp),
        "delta_partitions": len(dp),
        "view_branches": view_sql.count("UNION ALL\nSELECT") + 1,
        "view_sql_chars": len(view_sql),
    }


def measure_level(spark, dbt: Dbt, groups: int, level: int, seq: int) -> dict[str, Any]:
    run = dbt.invoke("run", "--select", "hist", vars={"dt": day(1), "seq": seq})
    by = run["statements"]["by_kind"]
    catalog = {k: v for k, v in by.items() if k in CATALOG_KINDS}
    out: dict[str, Any] = {
        "days_per_group": level,
        "dbt_run_wall_s": run["wall_s"],
        "dbt_run_statements": run["statements"]["count"],
        "run_catalog_s": sum(v["span_s"] for v in catalog.values()),
        "run_catalog_calls": {k: v["count"] for k, v in catalog.items()},
        "run_view_refresh_s": by.get("CREATE OR REPLACE VIEW", {}).get("span_s", 0.0),
        "run_statements_by_kind": by,
    }
    out.update({f"pure_{k}": v for k, v in pure_planner(spark).items()})
    mid = day(-(level // 2))
    out["query_compacted"] = {
        "dt": mid,
        **plan_time(spark, f"SELECT * FROM {SCHEMA}.hist WHERE region = 'r03' AND dt = '{mid}'"),
    }
    out["query_latest"] = {
        "dt": day(1),
        **plan_time(spark, f"SELECT * FROM {SCHEMA}.hist WHERE region = 'r03' AND dt = '{day(1)}'"),
    }
    return out


def scenario(out: Path, name: str, groups: int, levels: list[int]) -> list[dict[str, Any]]:
    root = fresh_root(out, f"planning_{name}")
    spark = start_spark(root, "4g")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
    dbt = Dbt(write_project(root, groups))
    dbt.invoke("parse")
    regions = [f"r{g:02d}" for g in range(groups)]
    # the chain's first day (snapshot branch, with rows), then its history below it
    dbt.invoke("run", "--select", "hist", vars={"dt": day(-levels[-1] - 10), "seq": 0})
    results, have = [], 0
    for i, level in enumerate(levels):
        snaps, deltas = [], []
        for off in range(-level + 1, -have + 1):  # days END-level+1 .. END-have
            for r in regions:
                deltas.append((r, day(off)))
                if (name == "weekly" and off % 7 == 0) or (name == "compacted" and off <= -6):
                    snaps.append((r, day(off)))
        t_add = add_partitions(spark, "hist__snapshot", snaps) + add_partitions(
            spark, "hist__delta", deltas
        )
        have = level
        print(
            f"[{name}] {level} days x {groups} groups: added {len(snaps)} snapshot + "
            f"{len(deltas)} delta partitions in {t_add:.0f} s; measuring ...",
            flush=True,
        )
        try:
            res = measure_level(spark, dbt, groups, level, seq=(i + 1) * 1000)
        except RuntimeError as e:  # e.g. the view's text is over the metastore's limit
            why = next(
                (
                    ln.strip()
                    for ln in str(e).splitlines()
                    if "Exception" in ln or ("Error" in ln and "Runtime" not in ln)
                ),
                str(e)[:300],
            )
            print(f"[{name}]   FAILED at {level} days x {groups} groups: {why}", flush=True)
            results.append(
                {
                    "days_per_group": level,
                    "failed": why,
                    **{f"pure_{k}": v for k, v in pure_planner(spark).items()},
                }
            )
            break
        res["add_partitions_s"] = t_add
        res["partitions"] = res["pure_snapshot_partitions"] + res["pure_delta_partitions"]
        results.append(res)
        print(
            f"[{name}]   run {res['dbt_run_wall_s']:.1f} s, catalog {res['run_catalog_s']:.2f} s, "
            f"view {res['run_view_refresh_s']:.2f} s, planner {res['pure_planner_s']:.3f} s, "
            f"query compacted {res['query_compacted']['optimized_s']:.3f} s, latest "
            f"{res['query_latest']['optimized_s']:.3f} s",
            flush=True,
        )
    spark.stop()
    return results


FIGURES = [
    ("dbt daily run (wall)", lambda r: r["dbt_run_wall_s"]),
    ("  catalog statements in the run", lambda r: r["run_catalog_s"]),
    ("  CREATE OR REPLACE VIEW in the run", lambda r: r["run_view_refresh_s"]),
    ("planner + renderer (pure Python)", lambda r: r["pure_planner_s"]),
    ("catalog listing for one Catalog.load", lambda r: r["pure_catalog_s"]),
    ("optimizer: compacted day (analyzed)", lambda r: r["query_compacted"]["analyzed_s"]),
    ("optimizer: compacted day (optimized)", lambda r: r["query_compacted"]["optimized_s"]),
    ("optimizer: compacted day (physical)", lambda r: r["query_compacted"]["physical_s"]),
    ("optimizer: latest day (analyzed)", lambda r: r["query_latest"]["analyzed_s"]),
    ("optimizer: latest day (optimized)", lambda r: r["query_latest"]["optimized_s"]),
    ("optimizer: latest day (physical)", lambda r: r["query_latest"]["physical_s"]),
]


def print_table(name: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    for r in results:
        if "failed" in r:
            print(
                f"\n{name}: the daily run FAILED at {r['days_per_group']} days per group "
                f"({r['pure_view_branches']} view branches, {r['pure_view_sql_chars']} characters "
                f"of view SQL): {r['failed']}"
            )
    results = [r for r in results if "failed" not in r]
    if not results:
        return {"sizes": [], "growth": {}}
    sizes = [r["partitions"] for r in results]
    print(f"\n{name}: seconds at N partitions (snapshot + delta, 10 groups); growth = last / first")
    print(f"{'figure':40s}" + "".join(f"{n:>10d}" for n in sizes) + f"{'growth':>9s}")
    growth = {}
    for label, f in FIGURES:
        vals = [f(r) for r in results]
        g = vals[-1] / vals[0] if vals[0] else float("nan")
        growth[label.strip()] = g
        print(f"{label:40s}" + "".join(f"{v:10.3f}" for v in vals) + f"{g:8.1f}x")
    print(f"{'view branches':40s}" + "".join(f"{r['pure_view_branches']:10d}" for r in results))
    print(
        f"{'view SQL (characters)':40s}"
        + "".join(f"{r['pure_view_sql_chars']:10d}" for r in results)
    )
    return {"sizes": sizes, "growth": growth}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--levels", default="10,100,1000", help="days of history per group")
    ap.add_argument(
        "--weekly-levels",
        default="4,20,100",
        help="chain partitions per group of the weekly-compacted history",
    )
    ap.add_argument("--scenarios", default="compacted,weekly")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    ap.add_argument("--json-out", help=argparse.SUPPRESS)  # one scenario, run as a subprocess
    ap.add_argument(
        "--chart-only",
        metavar="JSON",
        help="draw the chart of an earlier run's bench_planning.json and exit",
    )
    args = ap.parse_args()
    if args.chart_only:
        src = Path(args.chart_only)
        chart(json.loads(src.read_text()), src.with_suffix(".png"))
        print(f"wrote {src.with_suffix('.png')}")
        return 0
    if not args.json_out:  # the parent draws the chart
        require_matplotlib(ap)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    levels = [int(x) for x in args.levels.split(",")]
    t0 = time.perf_counter()
    report: dict[str, Any] = {"params": vars(args), "scenarios": {}}
    names = args.scenarios.split(",")
    if args.json_out:  # child: one scenario in this process
        name = names[0]
        lv = levels if name == "compacted" else [int(x) for x in args.weekly_levels.split(",")]
        Path(args.json_out).write_text(
            json.dumps(scenario(out, name, args.groups, lv), default=str)
        )
        return 0
    for name in names:  # each scenario in its own process: its own JVM and Derby metastore
        part = out / f"bench_planning_{name}.part.json"
        cmd = [sys.executable, __file__, "--scenarios", name, "--json-out", str(part)]
        for k in ("groups", "levels", "weekly_levels", "out"):
            cmd += [f"--{k.replace('_', '-')}", str(getattr(args, k))]
        subprocess.run(cmd, check=True)
        report["scenarios"][name] = {"levels": json.loads(part.read_text())}
        part.unlink()
    for name, sc in report["scenarios"].items():
        sc.update(print_table(name, sc["levels"]))
    report["total_s"] = time.perf_counter() - t0
    path = out / "bench_planning.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    chart(report, path.with_suffix(".png"))
    print(f"\nwrote {path} and {path.with_suffix('.png').name} ({report['total_s']:.0f} s in all)")
    return 0


CHARTED = [  # (label, figure, style): the figures charted, per scenario
    ("daily dbt run", lambda r: r["dbt_run_wall_s"], "o-"),
    ("view refresh in the run", lambda r: r["run_view_refresh_s"], "s-"),
    ("planner (pure Python)", lambda r: r["pure_planner_s"], "^-"),
    ("one-partition query, compacted day", lambda r: r["query_compacted"]["optimized_s"], "D-"),
    ("one-partition query, latest day", lambda r: r["query_latest"]["optimized_s"], "v-"),
]


def chart(report: dict[str, Any], path: Path) -> None:
    """One panel per scenario: seconds against partitions (log-log): a flat line is no growth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = {
        n: [r for r in sc["levels"] if "failed" not in r] for n, sc in report["scenarios"].items()
    }
    measured = {n: rows for n, rows in measured.items() if rows}
    if not measured:
        return
    fig, axes = plt.subplots(1, len(measured), figsize=(6.5 * len(measured), 4.8), squeeze=False)
    for ax, (name, rows) in zip(axes[0], measured.items(), strict=False):
        xs = [r["partitions"] for r in rows]
        for label, f, style in CHARTED:
            ax.plot(xs, [f(r) for r in rows], style, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")  # growth reads as slope, small figures stay visible
        ax.set_xticks(xs, [f"{x:,}" for x in xs])
        ax.minorticks_off()
        ax.set_xlabel("partitions (snapshot + delta)")
        ax.set_ylabel("seconds")
        ax.set_title(f"{name} history, {report['params']['groups']} groups")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
