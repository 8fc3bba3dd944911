"""Chain table vs the classic daily full snapshot through a shared Spark server, side by side.

    .venv/bin/python benchmarks/bench_server.py --server thrift|connect [--rows 2000000 --days 14]

bench_chain.py's change log and its two models, but dbt and the reads go through one server
that `scripts/spark-local.sh` starts (its state under the out dir, a free port, the JVM's heap
from --driver-memory) and stops at the end: a Spark Thrift Server (`--server thrift`, dbt
`method: thrift`, reads over PyHive) or a Spark Connect server (`--server connect`, dbt
`method: session` with SPARK_REMOTE=sc://127.0.0.1:<port>, reads through a Connect session).
The change log is written there in SQL, the same rows as bench_chain.generate_source.

Day 1 loads both models (first_load). Each later day runs both (whichever went first the day
before goes second), then reads the new day (bench_chain.read_days: count + checksum, a warm-up
and --read-repeats rounds) from the classic partition and through the chain's view; equal rows
and checksums asserted. Figures chain / classic, as bench_chain names them: daily_run (days
without a compaction), daily_total (run + 3 reads), first_load, read_uncompacted_avg, the cycle
ratios, and the SQL statements of a daily run. Writes bench_server_<server>_n<rows>.json + .png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "functional"))
import servers  # noqa: E402  (tests/functional/servers.py: free ports on 127.0.0.1)
from bench_chain import (  # noqa: E402
    GROUP_PREFIX,
    READS_A_DAY,
    SCHEMA,
    SRC,
    chain_policy,
    chart,
    day_values,
    inline_compaction_s,
    read_days,
    write_project,
)
from common import Dbt, fresh_root, median, ratio, require_matplotlib  # noqa: E402
from cycle import READS_A_DAY as CYCLE_READS  # noqa: E402
from cycle import cycle_ratios  # noqa: E402

from dbt.adapters.chaintable.connections import ChainTableCredentials  # noqa: E402

GOALS = {"daily_run": 0.25, "daily_total": 0.5}  # chain / classic, through either server
SPARK_LOCAL = HERE.parent / "scripts" / "spark-local.sh"
M = 1_000_000  # the hash buckets generate_source picks the changed keys with


# ---- the server and its clients ----------------------------------------------------------------
def spark_local(action: str, server: str, state: Path, port: int, memory: str) -> None:
    """scripts/spark-local.sh start|stop thrift|connect, with its state under the run's dir."""
    # SPARK_REMOTE is set for dbt (connect): spark-submit must not see it
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")
    }
    env.update(
        PYTHON=sys.executable,  # the venv running this script: a worktree may have none of its own
        CHAINTABLE_SPARK_STATE=str(state),
        THRIFT_PORT=str(port),
        CONNECT_PORT=str(port),
        SPARK_DRIVER_MEMORY=memory,  # spark-submit's driver heap, the server's only JVM
    )
    subprocess.run(["bash", str(SPARK_LOCAL), action, server], env=env, check=True)


def server_heap(state: Path, server: str) -> str | None:
    """The -Xmx the server's JVM was started with (from its command line), None if unknown."""
    cls = {"thrift": servers.THRIFT_CLASS, "connect": servers.CONNECT_CLASS}[server]
    try:
        pid = (state / "pids" / f"spark-chaintable-{cls}-1.pid").read_text().strip()
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return next((a[4:].decode() for a in args if a.startswith(b"-Xmx")), None)


class ThriftClient:
    """One PyHive session on the Thrift Server."""

    def __init__(self, port: int):
        from pyhive import hive

        self.conn = hive.connect(host=servers.HOST, port=port, username="bench")

    def rows(self, sql: str) -> list[tuple]:
        cur = self.conn.cursor()
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def close(self) -> None:
        self.conn.close()


class ConnectClient:
    """A Spark Connect session on the server dbt's session method reaches (SPARK_REMOTE)."""

    def __init__(self, port: int):
        from pyspark.sql import SparkSession

        self.spark = SparkSession.builder.remote(f"sc://{servers.HOST}:{port}").getOrCreate()

    def rows(self, sql: str) -> list[tuple]:
        return [tuple(r) for r in self.spark.sql(sql).collect()]

    def close(self) -> None:
        self.spark.stop()


def profile_output(server: str, port: int, poll_interval: float) -> dict[str, Any]:
    """The dbt target on the server (servers.thrift_output, as the tests', for thrift)."""
    if server == "connect":  # SPARK_REMOTE makes the session method a Connect client
        return {"type": "chaintable", "method": "session", "host": "localhost", "schema": SCHEMA}
    return servers.thrift_output(port, SCHEMA, poll_interval=poll_interval)


# ---- the change log, in SQL ------------------------------------------------------------------
def day_select(ids: str, k: int, op: str, day: str, groups: int) -> str:
    """The rows of day number k for the keys `ids` (a FROM clause with column id), as
    generate_source's values(): the same expressions and literal types (k an INT, so the
    hashes agree)."""
    h = f"xxhash64(id, {k})"
    cols = [
        "id",
        "concat('customer_', CAST(id AS STRING)) AS name",
        "element_at(array('new', 'paid', 'shipped', 'done', 'returned'), "
        f"CAST(pmod({h}, 5) + 1 AS INT)) AS status",
        f"CAST(pmod(xxhash64(id, {k}, 'a'), 10000000) / 100 AS DECIMAL(12,2)) AS amount",
        f"CAST(pmod({h}, 97) AS INT) AS qty",
        "concat('note ', substr(sha2(CAST(id AS STRING), 256), 1, 24)) AS note",
        f"{op} AS op",
        f"{k} * {10**10} + id AS seq",
    ]
    if groups > 1:
        cols.append(f"concat('{GROUP_PREFIX}', CAST(pmod(id, {groups}) AS STRING)) AS grp")
    return f"SELECT {', '.join(cols)}, '{day}' AS dt FROM {ids}"


def source_sql(rows: int, days: list[str], rate: float, groups: int) -> list[str]:
    """bench_src.changes as bench_chain.generate_source writes it, in statements a Thrift
    Server runs too (it has no DataFrame API): one INSERT a day, one file a day."""
    inserts = round(rows * rate * 0.2)
    grp = ", grp STRING" if groups > 1 else ""
    out = [
        f"CREATE DATABASE IF NOT EXISTS {SRC}",
        f"CREATE DATABASE IF NOT EXISTS {SCHEMA}",
        f"DROP TABLE IF EXISTS {SRC}.changes",
        f"CREATE TABLE {SRC}.changes (id BIGINT, name STRING, status STRING, amount "
        f"DECIMAL(12,2), qty INT, note STRING, op STRING, seq BIGINT{grp}, dt STRING) "
        "USING parquet PARTITIONED BY (dt)",
    ]
    parts = [[day_select(f"range({rows})", 1, "'+I'", days[0], groups)]]
    for k, day in enumerate(days[1:], start=2):
        pick = f"pmod(xxhash64(id, {k}, 'pick'), {M}) < {int(rate * 0.8 * M)}"
        kind = f"CASE WHEN pmod(xxhash64(id, {k}, 'kind'), 8) = 0 THEN '-D' ELSE '+U' END"
        start = rows + (k - 2) * inserts
        parts.append(
            [
                day_select(f"range({rows}) WHERE {pick}", k, kind, day, groups),
                day_select(f"range({start}, {start + inserts})", k, "'+I'", day, groups),
            ]
        )
    for selects in parts:  # DISTRIBUTE BY dt: one task, one file a day, as repartition("dt")
        union = " UNION ALL ".join(f"({s})" for s in selects)
        out.append(f"INSERT INTO {SRC}.changes SELECT * FROM ({union}) u DISTRIBUTE BY dt")
    return out


def generate(client, rows: int, days: list[str], rate: float, groups: int) -> dict[str, int]:
    for sql in source_sql(rows, days, rate, groups):
        client.rows(sql)
    counts = dict(client.rows(f"SELECT dt, count(*) FROM {SRC}.changes GROUP BY dt"))
    return {d: int(counts.get(d, 0)) for d in days}


# ---- the days --------------------------------------------------------------------------------
def run_days(dbt: Dbt, client, days: list[str], args) -> dict[str, Any]:
    """Every day's two runs (order alternating) and, from day 2, the new day's reads."""
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "chain": []}
    day_reads: list[dict[str, Any]] = []
    compactions: list[dict[str, Any]] = []

    def query(sql: str) -> tuple[tuple, None]:  # no planning time apart: the server plans
        return client.rows(sql)[0], None

    relations = {"baseline": f"{SCHEMA}.ods_full", "view": f"{SCHEMA}.ods_chain"}
    for i, day in enumerate(days):
        vars_ = {"dt": day, "prev_dt": days[i - 1] if i else day}
        dbt.invoke("parse", vars=vars_)  # the re-parse new vars cause, untimed (bench_chain)
        line = [f"day {i + 1:2d} {day}"]
        for which in ["baseline", "chain"] if i % 2 == 0 else ["chain", "baseline"]:
            model = "ods_full" if which == "baseline" else "ods_chain"
            r = dbt.invoke("run", "--select", model, vars=vars_)
            runs[which].append({"day": day, **r})
            line.append(f"{which} {r['wall_s']:6.1f} s ({r['statements']['count']} stmts)")
            compacted = inline_compaction_s(dbt.messages) if which == "chain" else None
            if compacted is not None:
                compactions.append({"day": day, "inline": True, "wall_s": compacted})
                line.append(f"(compacted inline in {compacted:.1f} s)")
        if i:
            got = read_days(query, relations, day, args.groups, args.read_repeats)
            b, v = got["baseline"], got["view"]
            if (v["rows"], v["checksum"]) != (b["rows"], b["checksum"]):
                raise SystemExit(
                    f"the chain's view reads {day} as {v['rows']} rows {v['checksum']}, "
                    f"the classic job {b['rows']} rows {b['checksum']}"
                )
            compacted_day = any(c["day"] == day for c in compactions)
            day_reads.append({"day": day, "compacted": compacted_day, **got})
            line.append(f"read base {b['median_s']:.2f} s view {v['median_s']:.2f} s")
        print("  ".join(line), flush=True)
    return {"daily_runs": runs, "day_reads": day_reads, "compactions": compactions}


def statements(runs: dict[str, list[dict[str, Any]]], ordinary: set[str]) -> dict[str, Any]:
    """Statements of a daily run: each side's median count over the `ordinary` days (days
    2..D but the chain's compaction days), and the kinds of its run at that median (the lower
    middle one)."""
    out: dict[str, Any] = {}
    for which, rs in runs.items():
        days = sorted(
            (r for r in rs if r["day"] in ordinary), key=lambda r: r["statements"]["count"]
        )
        if not days:
            continue
        middle = days[(len(days) - 1) // 2]
        out[which] = {
            "median_count": median([r["statements"]["count"] for r in days]),
            "counts": {r["day"]: r["statements"]["count"] for r in rs},
            "example_day": middle["day"],
            "example_by_kind": {k: v["count"] for k, v in middle["statements"]["by_kind"].items()},
        }
    return out


def figures(m: dict[str, Any]) -> dict[str, Any]:
    """Ratios chain / classic and the medians they are made of (as bench_chain computes them)."""
    runs, day_reads = m["daily_runs"], m["day_reads"]
    compact_days = {c["day"] for c in m["compactions"]}
    daily_b = [r["wall_s"] for r in runs["baseline"][1:]]
    daily_c = [r["wall_s"] for r in runs["chain"][1:] if r["day"] not in compact_days]
    comp_c = [r["wall_s"] for r in runs["chain"] if r["day"] in compact_days]
    wall = {w: {r["day"]: r["wall_s"] for r in runs[w]} for w in runs}
    totals = {
        "baseline": [
            wall["baseline"][d["day"]] + READS_A_DAY * d["baseline"]["median_s"] for d in day_reads
        ],
        "chain": [wall["chain"][d["day"]] + READS_A_DAY * d["view"]["median_s"] for d in day_reads],
    }
    per_day = [ratio(d["view"]["median_s"], d["baseline"]["median_s"]) for d in day_reads]
    delta = [x for x, d in zip(per_day, day_reads, strict=True) if not d["compacted"]]
    ratios: dict[str, Any] = {
        "daily_run": ratio(median(daily_c), median(daily_b)),
        "compaction_day_run": ratio(median(comp_c), median(daily_b)) if comp_c else None,
        "first_load": ratio(runs["chain"][0]["wall_s"], runs["baseline"][0]["wall_s"]),
        "read_uncompacted_avg": sum(delta) / len(delta) if delta else None,
        "read_uncompacted_worst": max(delta) if delta else None,
        "daily_total": ratio(median(totals["chain"]), median(totals["baseline"])),
        **cycle_ratios(m),
    }
    medians = {
        "daily_run_s": {"baseline": median(daily_b), "chain": median(daily_c)},
        "compaction_day_run_s": median(comp_c) if comp_c else None,
        "first_load_s": {w: runs[w][0]["wall_s"] for w in runs},
        "daily_total_s": {w: median(v) for w, v in totals.items()},
    }
    ordinary = {r["day"] for r in runs["chain"][1:]} - compact_days
    return {"ratios": ratios, "medians": medians, "statements": statements(runs, ordinary)}


# ---- the run ---------------------------------------------------------------------------------
def measure(args, root: Path, days: list[str], port: int) -> dict[str, Any]:
    """Generate the change log through the server, then the days; the client closed after."""
    if args.server == "connect":
        os.environ["SPARK_REMOTE"] = f"sc://{servers.HOST}:{port}"  # dbt's session: a client
    client = ThriftClient(port) if args.server == "thrift" else ConnectClient(port)
    try:
        t0 = time.perf_counter()
        counts = generate(client, args.rows, days, args.rate, args.groups)
        gen_s = time.perf_counter() - t0
        print(f"  source rows per day: {counts[days[0]]} then ~{counts[days[-1]]} ({gen_s:.0f} s)")
        output = profile_output(args.server, port, args.poll_interval)
        policy = chain_policy(args.compact_every)
        dbt = Dbt(write_project(root, args.groups, "window", policy, output=output))
        dbt.invoke("parse")  # dbt and the adapter load on the first invocation: not a day's
        m = run_days(dbt, client, days, args)
    finally:
        client.close()
    got = sorted(c["day"] for c in m["compactions"])
    expected = [days[i] for i in range(args.compact_every, args.days, args.compact_every)]
    if got != expected:
        raise SystemExit(f"the chain's policy compacted on {got}, expected {expected}")
    m["params_extra"] = {"source_rows_per_day": counts, "generate_s": gen_s}
    return m


def print_table(res: dict[str, Any]) -> None:
    r, md, st = res["ratios"], res["medians"], res["statements"]
    rows = [
        (
            "first load (day 1)",
            md["first_load_s"]["baseline"],
            md["first_load_s"]["chain"],
            "first_load",
        ),
        ("daily run (median; chain: no compaction)", *md["daily_run_s"].values(), "daily_run"),
    ]
    if md["compaction_day_run_s"] is not None:
        rows.append(
            (
                "   a run that compacted inline",
                None,
                md["compaction_day_run_s"],
                "compaction_day_run",
            )
        )
    rows.append(
        (
            f"run + {READS_A_DAY} reads of the day (median)",
            *md["daily_total_s"].values(),
            "daily_total",
        )
    )
    print(f"\n{'figure':44s} {'classic':>10s} {'chain':>10s} {'chain/cl.':>10s}  goal")
    for name, b, c, key in rows:
        g = res["goals"].get(key)
        verdict = f"  {g['goal']:7s} {'met' if g['met'] else 'MISSED'}" if g else ""
        cells = [f"{x:8.2f} s" if x is not None else "" for x in (b, c)]
        print(f"{name:44s} {cells[0]:>10s} {cells[1]:>10s} {r[key]:10.3f}{verdict}")
    if r["read_uncompacted_avg"] is not None:
        avg, worst = r["read_uncompacted_avg"], r["read_uncompacted_worst"]
        print(
            f"{'new delta-only day via the view, avg / worst':44s} {'':21s} {avg:10.3f} / {worst:.3f}"
        )
    cycle = " / ".join(f"{r[f'cycle_k{k}']:.3f}" for k in CYCLE_READS)
    print(
        f"{'cycle, days 2..D, ' + '/'.join(map(str, CYCLE_READS)) + ' reads a day':44s} {'':21s} {cycle}"
    )
    if "baseline" in st and "chain" in st:
        b, c = st["baseline"], st["chain"]
        print(
            f"{'statements a daily run (median)':44s} {b['median_count']:10g} {c['median_count']:10g}"
        )
        for which, s in (("chain", c), ("classic", b)):
            kinds = ", ".join(f"{k} {n}" for k, n in s["example_by_kind"].items())
            print(f"   {which}'s run of {s['example_day']}: {kinds}")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--server", choices=["thrift", "connect"], required=True)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument(
        "--compact-every", type=int, default=7, help="the chain's max_chain_length (inline)"
    )
    ap.add_argument("--read-repeats", type=int, default=3)
    ap.add_argument("--driver-memory", default="6g", help="the server JVM's heap")
    ap.add_argument(
        "--poll-interval",
        type=float,
        default=ChainTableCredentials.poll_interval,
        help="thrift: the profile's poll_interval, seconds between dbt's polls of a running "
        "statement (default: the adapter's, %(default)s)",
    )
    ap.add_argument("--out", default=str(HERE / "out"))
    args = ap.parse_args()
    require_matplotlib(ap)

    out = Path(args.out).resolve()
    name = f"bench_server_{args.server}_n{args.rows}"
    root = fresh_root(out, f"server_{args.server}_n{args.rows}_d{args.days}_g{args.groups}")
    days, port, state = day_values(args.days), servers.free_port(), root / "server"
    t_all = time.perf_counter()
    spark_local("start", args.server, state, port, args.driver_memory)
    try:
        heap = server_heap(state, args.server)
        print(
            f"{args.server} server on 127.0.0.1:{port} (-Xmx{heap}); generating {args.rows} rows x {args.days} days",
            flush=True,
        )
        m = measure(args, root, days, port)
    finally:
        spark_local("stop", args.server, state, port, args.driver_memory)
    f = figures(m)
    result = {
        "params": {
            **vars(args),
            "out": str(out),
            "port": port,
            "server_heap": heap,
            "days_list": days,
            **m.pop("params_extra"),
        },
        **f,
        "goals": {
            k: {
                "goal": f"<= {g}",
                "limit": g,
                "measured": f["ratios"][k],
                "met": f["ratios"][k] <= g,
            }
            for k, g in GOALS.items()
        },
        **m,
        "total_s": time.perf_counter() - t_all,
    }
    print_table(result)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
    p = result["params"]
    title = f"{args.server}: N={p['rows']:,} D={p['days']} r={p['rate']} G={p['groups']}"
    chart(result, out / f"{name}.png", title)
    print(f"wrote {out / name}.json and .png ({result['total_s']:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
