"""Readers of a shared Spark Thrift Server while dbt writes: the chain table against the classic
daily full snapshot, measured side by side in one run.

    .venv/bin/python benchmarks/bench_readers.py [--rows 500000 --days 8 --readers 3]

A Thrift Server from the pyspark wheel (127.0.0.1, a free port, stopped by its PID at the end)
holds one synthetic ODS change log (as bench_chain.py's: day 1 the full export, later days
1 % updates, deletes and inserts) and two dbt models over it, run through `method: thrift`:
`ods_full` (the classic job: yesterday's full partition merged with today's changes into
today's) and `ods_chain` (chain_incremental, compaction policy max_chain_length 7, inline).

For every day after the first, each model's run is watched by `--readers` JDBC sessions that
loop over a read of the day before (count and checksum, as a dashboard would), from just before
the run starts until it ends. Reported per model: reads served per second during its runs, the
longest stall (the longest time in which no reader finished a read), the slowest single read,
failed reads and answers that changed (a published day must read the same all along).
Prints chain/classic ratios and writes bench_readers.json into --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import threading
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "functional"))
import servers  # noqa: E402  (tests/functional/servers.py: the wheel's servers on 127.0.0.1)
from common import Dbt, fresh_root, median, ratio  # noqa: E402

SCHEMA, SRC = "bench", "bench_src"
COLS = "id, name, status, amount, op, seq"


def day_values(days: int) -> list[str]:
    return [f"2025{1 + i // 28:02d}{1 + i % 28:02d}" for i in range(days)]


def generate_sql(rows: int, days: list[str], rate: float) -> list[str]:
    """The change log, in SQL on the server: day 1 every key (+I); day k about rate*rows changes
    (70 % +U, 10 % -D of existing keys chosen by a hash of key and day, 20 % +I of new keys)."""
    changed = round(rows * rate)
    out = [
        f"CREATE DATABASE IF NOT EXISTS {SRC}",
        f"DROP TABLE IF EXISTS {SRC}.changes",
        f"CREATE TABLE {SRC}.changes (id BIGINT, name STRING, status STRING, amount DOUBLE, "
        "op STRING, seq BIGINT, dt STRING) USING parquet PARTITIONED BY (dt)",
        f"INSERT INTO {SRC}.changes SELECT id, concat('n', id), 'new', id * 0.01, '+I', id, "
        f"'{days[0]}' FROM range({rows})",
    ]
    for k, d in enumerate(days[1:], 2):
        upd, dele = round(changed * 0.7), round(changed * 0.1)
        ins = changed - upd - dele
        pick = f"pmod(hash(id, {k}), {rows})"
        out.append(
            f"INSERT INTO {SRC}.changes "
            f"SELECT DISTINCT {pick} AS id, concat('u', {k}), 'upd', {k} * 1.0, '+U', "
            f"{k} * 10000000000 + {pick}, '{d}' FROM range({upd}) "
            f"UNION ALL SELECT DISTINCT pmod(hash(id, {k}, 'd'), {rows}), NULL, NULL, NULL, '-D', "
            f"{k} * 10000000000 + pmod(hash(id, {k}, 'd'), {rows}) + 1, '{d}' FROM range({dele}) "
            f"UNION ALL SELECT {rows} * {k} + id, concat('i', {k}), 'new', 1.0, '+I', "
            f"{k} * 10000000000 + id, '{d}' FROM range({ins})"
        )
    return out


def write_project(root: Path, port: int) -> Path:
    proj = root / "project"
    (proj / "models").mkdir(parents=True)
    (proj / "dbt_project.yml").write_text(
        "name: readers_bench\nversion: '1.0'\nconfig-version: 2\nprofile: readers_bench\n"
        "model-paths: [models]\n"
    )
    output = servers.thrift_output(port, SCHEMA)
    (proj / "profiles.yml").write_text(
        json.dumps({"readers_bench": {"target": "b", "outputs": {"b": output}}})
    )
    src = f"{SRC}.changes"
    (proj / "models" / "ods_chain.sql").write_text(
        textwrap.dedent(f"""\
        {{{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
                  sequence_field='seq', rowkind_field='op', chain_partition={{'dt': var('dt')}},
                  chain_compaction={{'max_chain_length': 7}}) }}}}
        select {COLS}, dt from {src} where dt = '{{{{ var("dt") }}}}'
        """)
    )
    # the classic merge, yesterday's full partition + today's changes (the latest row per key)
    (proj / "models" / "ods_full.sql").write_text(
        textwrap.dedent(f"""\
        {{{{ config(materialized='incremental', incremental_strategy='insert_overwrite',
                  partition_by=['dt'], file_format='parquet') }}}}
        {{% if is_incremental() %}}
        select {COLS}, '{{{{ var("dt") }}}}' as dt from (
          select *, row_number() over (partition by id order by seq desc, src desc) as rn from (
            select {COLS}, 0 as src from {{{{ this }}}} where dt = '{{{{ var("prev_dt") }}}}'
            union all
            select {COLS}, 1 as src from {src} where dt = '{{{{ var("dt") }}}}'
          ) u
        ) r where rn = 1 and op not in ('-U', '-D')
        {{% else %}}
        select {COLS}, dt from {src} where dt = '{{{{ var("dt") }}}}' and op not in ('-U', '-D')
        {{% endif %}}
        """)
    )
    return proj


class Readers:
    """`n` JDBC sessions looping over one query until stopped; every read's end time, seconds,
    answer or error."""

    def __init__(self, port: int, n: int, query: str):
        from pyhive import hive

        self.query, self.stop = query, threading.Event()
        self.conns = [hive.connect(host=servers.HOST, port=port, username="r") for _ in range(n)]
        self.reads: list[tuple[float, float, Any]] = []  # (end, seconds, answer | Exception)
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._loop, args=(c,)) for c in self.conns]

    def _loop(self, conn) -> None:
        while not self.stop.is_set():
            t0 = time.perf_counter()
            try:
                cur = conn.cursor()
                cur.execute(self.query)
                got: Any = tuple(cur.fetchall()[0])
            except Exception as e:  # a failed read is a finding, counted
                got = e
            t1 = time.perf_counter()
            with self.lock:
                self.reads.append((t1, t1 - t0, got))

    def __enter__(self) -> Readers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=300)
        for c in self.conns:
            c.close()


def watch(reads: list[tuple[float, float, Any]], start: float, end: float) -> dict[str, Any]:
    """Figures of the reads that ended in [start, end]: the run's window."""
    inside = sorted(r for r in reads if start <= r[0] <= end)
    ends = [start] + [r[0] for r in inside] + [end]
    answers = {str(r[2]) for r in inside if not isinstance(r[2], Exception)}
    return {
        "window_s": end - start,
        "reads": len(inside),
        "reads_per_s": len(inside) / (end - start),
        "longest_stall_s": max(b - a for a, b in pairwise(ends)),
        "slowest_read_s": max((r[1] for r in inside), default=0.0),
        "failed": sum(isinstance(r[2], Exception) for r in inside),
        "errors": sorted({str(r[2])[:200] for r in inside if isinstance(r[2], Exception)}),
        "distinct_answers": len(answers),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--days", type=int, default=8)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--readers", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "out"))
    args = ap.parse_args()

    out = Path(args.out).resolve()
    root = fresh_root(out, f"readers_n{args.rows}")
    days = day_values(args.days)
    t_all = time.perf_counter()
    server = servers.start_thrift(
        root / "server",
        conf={"spark.sql.shuffle.partitions": "4"},
    )
    try:
        from pyhive import hive

        admin = hive.connect(host=servers.HOST, port=server.port, username="admin")
        cur = admin.cursor()
        print(f"Thrift Server on {server.url}; generating {args.rows} rows x {args.days} days")
        for sql in generate_sql(args.rows, days, args.rate):
            cur.execute(sql)
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
        dbt = Dbt(write_project(root, server.port))
        figures: dict[str, list[dict[str, Any]]] = {"classic": [], "chain": []}
        runs: dict[str, list[float]] = {"classic": [], "chain": []}
        for i, day in enumerate(days):
            vars_ = {"dt": day, "prev_dt": days[i - 1] if i else day}
            dbt.invoke("parse", vars=vars_)
            for which, model in (("classic", "ods_full"), ("chain", "ods_chain")):
                if i == 0:
                    dbt.invoke("run", "--select", model, vars=vars_)
                    continue
                query = (
                    f"select count(*), sum(hash({COLS})) from {SCHEMA}.{model} "
                    f"where dt = '{days[i - 1]}'"
                )
                with Readers(server.port, args.readers, query) as readers:
                    time.sleep(1.0)  # the readers' first reads (planning, caches) before the run
                    start = time.perf_counter()
                    r = dbt.invoke("run", "--select", model, vars=vars_)
                    end = time.perf_counter()
                f = watch(readers.reads, start, end)
                figures[which].append({"day": day, **f})
                runs[which].append(r["wall_s"])
                print(
                    f"day {i + 1} {day} {which:7s} run {r['wall_s']:6.1f} s: "
                    f"{f['reads']:4d} reads, {f['reads_per_s']:5.2f}/s, longest stall "
                    f"{f['longest_stall_s']:5.2f} s, slowest read {f['slowest_read_s']:5.2f} s, "
                    f"failed {f['failed']}, answers {f['distinct_answers']}",
                    flush=True,
                )
        admin.close()
    finally:
        server.stop()

    def agg(which: str) -> dict[str, Any]:
        fs = figures[which]
        return {
            "reads_per_s_median": median([f["reads_per_s"] for f in fs]),
            "longest_stall_s": max(f["longest_stall_s"] for f in fs),
            "slowest_read_s": max(f["slowest_read_s"] for f in fs),
            "failed": sum(f["failed"] for f in fs),
            "changed_answers": sum(f["distinct_answers"] > 1 for f in fs),
            "run_median_s": median(runs[which]),
        }

    summary = {k: agg(k) for k in figures}
    ratios = {
        "reads_per_s": ratio(
            summary["chain"]["reads_per_s_median"], summary["classic"]["reads_per_s_median"]
        ),
        "longest_stall": ratio(
            summary["chain"]["longest_stall_s"], summary["classic"]["longest_stall_s"]
        ),
        "run": ratio(summary["chain"]["run_median_s"], summary["classic"]["run_median_s"]),
    }
    print()
    print(f"{'during the runs':34s} {'classic':>10s} {'chain':>10s} {'chain/classic':>14s}")
    for label, key, rkey in (
        ("reads served per second (median)", "reads_per_s_median", "reads_per_s"),
        ("longest read stall (s)", "longest_stall_s", "longest_stall"),
        ("slowest single read (s)", "slowest_read_s", None),
        ("dbt run (median s)", "run_median_s", "run"),
        ("failed reads", "failed", None),
        ("runs with a changed answer", "changed_answers", None),
    ):
        c, h = summary["classic"][key], summary["chain"][key]
        x = f"{ratios[rkey]:14.3f}" if rkey else ""
        print(f"{label:34s} {c:10.2f} {h:10.2f} {x}")
    result = {
        "params": {**vars(args), "days_list": days},
        "per_run": figures,
        "summary": summary,
        "ratios": ratios,
        "total_s": time.perf_counter() - t_all,
    }
    (out / "bench_readers.json").write_text(json.dumps(result, indent=2, default=str))
    print(f"wrote {out / 'bench_readers.json'} ({result['total_s']:.0f} s in all)")
    failed = summary["chain"]["failed"] + summary["chain"]["changed_answers"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
