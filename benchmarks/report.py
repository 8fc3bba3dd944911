"""Render the benchmark figures of README.md and benchmarks/README.md from the committed results.

    python benchmarks/report.py            # print README.md's Performance section
    python benchmarks/report.py --write    # rewrite the generated parts of both files
    python benchmarks/report.py --check    # exit 1 if either file differs from the results

Every figure between the markers comes from a JSON file of benchmarks/results/, so the README's
headline, its table and the results cannot disagree; tests/unit/test_performance_doc.py fails
when a results file changes and the documents were not regenerated. Generated parts:

  README.md            <!-- headline:begin/end -->     the intro's one-sentence summary
                       <!-- performance:begin/end -->  the Performance section's figures
  benchmarks/README.md <!-- results:begin/end -->      the current figures of every script

Which files: bench_chain_n10000000_g1.json is the headline, because 10M rows is the size at
which bench_chain.py sets all of its goals (GOALS_AT; at 2M the daily run alone has one, other
sizes none). bench_chain_n10000000_g1_rerun.json, a second run of the same code, is shown beside
it for the spread between runs; bench_chain_n2000000_g1.json is the default size, and
bench_chain_n2000000_g16.json the same with one chain per group (--groups 16), as
bench_chain_n10000000_g16.json is at 10M; bench_chain_n10000000_g16_quick.json ran those 16
groups again (--quick) after the served read's anti join took one long key and a run read the
anchors' record in one statement. bench_server_*.json
are bench_server.py's runs through a Thrift Server and a Spark Connect server. The
`_unsorted*` files are runs of the code before the compaction wrote its output sorted by key:
history, not shown. bench_sweep_n2000000.json is the break-even map (bench_sweep.py; its
`_r<rate>` files are the bench_chain runs it was made of). bench_readers_n500000.json and
bench_threads_n200000.json are the latest runs of those scripts at their defaults. bench_history_n10000000.json
(bench_history.py, 9 days, 1 timed round a read) is quoted in the README's History section. The goals and whether each was met are read from the
JSON, as bench_chain.py recorded them. Reads only JSON: no Spark, no dbt.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from cycle import cycle_ratios  # noqa: E402

RESULTS = HERE / "results"
ROOT = HERE.parent
README = ROOT / "README.md"
BENCH_README = HERE / "README.md"

HEADLINE = "bench_chain_n10000000_g1.json"
CHAIN_RUNS = [  # (column, file): the headline first
    ("10M rows", HEADLINE),
    ("10M, second run", "bench_chain_n10000000_g1_rerun.json"),
    ("10M rows, 16 groups", "bench_chain_n10000000_g16.json"),  # GROUPS_QUICK's "before"
    ("2M rows", "bench_chain_n2000000_g1.json"),
    ("2M rows, 16 groups", "bench_chain_n2000000_g16.json"),
]
READERS = "bench_readers_n500000.json"
THREADS = "bench_threads_n200000.json"
SWEEP = "bench_sweep_n2000000.json"
GROUPS_QUICK = "bench_chain_n10000000_g16_quick.json"  # after the two changes for groups
SERVERS = [  # (label, file): bench_server.py through each server, the classic job beside
    ("Thrift Server", "bench_server_thrift_n10000000.json"),
    ("Spark Connect", "bench_server_connect_n10000000.json"),
]


def load(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text())


def para(text: str, indent: str = "") -> str:
    """A paragraph wrapped at the README's 100 columns (a bullet's lines indented by `indent`)."""
    return textwrap.fill(
        text, 100, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
    )


def r3(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def secs(x: float) -> str:
    return f"{x:.1f} s"


def secs2(x: float) -> str:
    return f"{x:.2f} s"


def size(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def millions(n: int) -> str:
    return f"{n / 1e6:g}M"


def goal_limits(res: dict[str, Any], keys: list[str]) -> str | None:
    """'<= 1.4 / <= 1.6': the goals of `keys` in one run, None when it has none."""
    goals = [res["goals"][k]["goal"] for k in keys if k in res["goals"]]
    return " / ".join(goals) if goals else None


def missed(res: dict[str, Any], keys: list[str]) -> bool:
    return any(not res["goals"][k]["met"] for k in keys if k in res["goals"])


def chain_rows(res: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    """Per figure: (the cell of this run, the goal keys it is judged by)."""
    r, b, t = res["ratios"], res["bytes"], res["daily_run_median_s"]
    tot, cs = res["daily_total_median_s"], res["compaction_s"]
    bb, cb = sum(b["baseline"].values()), sum(b["chain"].values())
    mapped = res["reads"].get("mapped", {}).get("day")
    days, compacted = res["params"]["days_list"], res["params"]["compact_days"]
    last_chain = len(days) - 1 - days.index(compacted[-1]) if compacted else len(days) - 1
    rows = {
        f"storage after {res['params']['days']} days": (
            f"{r3(r['storage'])} ({size(cb)} vs {size(bb)})",
            ["storage"],
        ),
        "daily run, median (days without a compaction)": (
            f"{r3(r['daily_run'])} ({t['chain']:.2f} s vs {t['baseline']:.2f} s)",
            ["daily_run"],
        ),
        "the run that compacted inline, median": (
            f"{r3(r.get('compaction_day_run'))} ({secs(t['chain_compaction_days'])})"
            if t.get("chain_compaction_days") is not None
            else "-",
            [],
        ),
        "new delta-only day via the view, avg / worst": (
            f"{r3(r.get('read_uncompacted_avg'))} / {r3(r.get('read_uncompacted_worst'))}",
            ["read_uncompacted_avg", "read_uncompacted_worst"],
        ),
        "the same via `chain_read`, avg / worst": (
            f"{r3(r.get('read_uncompacted_avg_chain_read'))}"
            f" / {r3(r.get('read_uncompacted_worst_chain_read'))}",
            [],
        ),
        "compacted day via the view / `chain_read`": (
            f"{r3(r.get('read_compacted'))} / {r3(r.get('read_compacted_chain_read'))}",
            ["read_compacted"],
        ),
        "older day (through the mapping table) via the view / `chain_read`": (
            f"{r3(r.get('read_mapped'))} / {r3(r.get('read_mapped_chain_read'))}"
            if mapped
            else "-",
            [],
        ),
        "run + 3 reads of the new day, median": (
            f"{r3(r.get('daily_total'))} ({secs(tot['chain'])} vs {secs(tot['baseline'])})",
            ["daily_total"],
        ),
        f"compaction of the last day (anchor + {last_chain} deltas), warm": (
            f"{r3(r.get('compaction'))} ({secs(cs['warm_median'])} vs {secs(t['baseline'])})"
            if cs.get("warm_median") is not None
            else "-",
            ["compaction"],
        ),
        "cycle, days 2..D: every run + 1 / 3 / 10 reads of each new day": (
            " / ".join(r3(c) for c in cycle_ratios(res).values()),
            [],
        ),
        "first (full) load, day 1": (
            f"{secs(res['full_load_s']['chain'])} vs {secs(res['full_load_s']['baseline'])}",
            [],
        ),
    }
    return rows


def chain_table(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The ratios of every bench_chain run side by side; the goal column gives each size's goals
    as the runs recorded them, and a figure that missed its goal says so in its cell."""
    per_run = [(res, chain_rows(res)) for _, res in runs]
    head = ["ratio (chain / classic)", *(label for label, _ in runs), "goal"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for figure, (_, keys) in per_run[0][1].items():
        cells = [figure]
        goals: dict[int, str] = {}  # rows of the run -> its goals
        for res, rows in per_run:
            cell, _ = rows[figure]
            cells.append(cell + (" **missed**" if missed(res, keys) else ""))
            g = goal_limits(res, keys)
            if g is not None:
                goals.setdefault(res["params"]["rows"], g)
        if len(goals) == 1 and len({res["params"]["rows"] for res, _ in per_run}) == 1:
            cells.append(next(iter(goals.values())))
        else:
            cells.append("; ".join(f"{millions(n)}: {g}" for n, g in goals.items()) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def goals_summary(runs: list[tuple[str, dict[str, Any]]]) -> str:
    met = [(label, all(g["met"] for g in res["goals"].values())) for label, res in runs]
    if all(ok for _, ok in met):
        return "Every goal is met in each of these runs."
    which = "; ".join(label for label, ok in met if not ok)
    return f"Not every goal is met ({which}: the figures marked missed)."


def spread(runs: list[tuple[str, dict[str, Any]]]) -> str:
    """How far the runs of the headline's size and groups differ, figure by figure (the
    largest)."""
    p = runs[0][1]["params"]
    n = p["rows"]
    same = [
        res["ratios"]
        for _, res in runs
        if (res["params"]["rows"], res["params"]["groups"]) == (n, p["groups"])
    ]
    if len(same) < 2:
        return ""
    gaps = {
        k: max(r[k] for r in same) - min(r[k] for r in same)
        for k in same[0]
        if all(r.get(k) is not None for r in same)
    }
    words = {2: "two", 3: "three"}.get(len(same), str(len(same)))
    mid = sorted(gaps.values())[len(gaps) // 2]
    return (
        f"Between the {words} runs at {millions(n)} a ratio differs by {mid:.3f} in the median "
        f"and by {max(gaps.values()):.3f} at most."
    )


def planning_line(res: dict[str, Any]) -> str:
    """The planning of the headline reads: the view and chain_read against the classic day."""
    reads = res["reads"]

    def of(label: str, name: str) -> str:
        r = reads[label]
        if r["chain_length"]:
            name = f"{name}, {r['chain_length']} deltas from its anchor"
        return (
            f"{name} ({r['day']}) through the view {r['chain']['planning_median_s']:.3f} s, "
            f"`chain_read` {r['chain_read']['planning_median_s']:.3f} s, the classic partition "
            f"{r['baseline']['planning_median_s']:.3f} s"
        )

    parts = [
        of(k, n)
        for k, n in (
            ("compacted", "the compacted day"),
            ("uncompacted", "a delta-only day"),
        )
        if k in reads
    ]
    return (
        f"Planning of a read at {millions(res['params']['rows'])} (medians): "
        + "; ".join(parts)
        + "."
    )


def run_line(label: str, name: str, res: dict[str, Any], prefix: str) -> str:
    p = res["params"]
    later = [n for d, n in p["source_rows_per_day"].items() if d != p["days_list"][0]]
    groups = "one group" if p["groups"] == 1 else f"{p['groups']} groups"
    return (
        f"- {label} ([JSON]({prefix}{name})): {p['days']} days, "
        f"{p['rate'] * 100:g} % changed a day ({min(later):,}-{max(later):,} rows), {groups}, "
        f"compacted {', '.join(p['compact_days']) or 'never'}; {res['total_s']:.0f} s in all"
    )


def headline(res: dict[str, Any]) -> str:
    """The intro's sentence: storage, the daily run and the new day's read of the headline run."""
    r = res["ratios"]
    return (
        f"at {millions(res['params']['rows'])} rows it stores {r['storage']:.2f}x of the daily "
        f"snapshots' bytes, a daily run costs {r['daily_run']:.2f}x of the classic job's and a new "
        f"day reads in {r['read_uncompacted_avg']:.2f}x of a stored day's time on average "
        f"({r['read_uncompacted_worst']:.2f}x at worst)"
    )


def chain_runs() -> list[tuple[str, str, dict[str, Any]]]:
    return [(label, name, load(name)) for label, name in CHAIN_RUNS]


def readers_table(prefix: str) -> list[str]:
    d = load(READERS)
    s, q, p = d["summary"], d["ratios"], d["params"]
    c, k = s["chain"], s["classic"]
    return [
        para(
            f"`bench_readers.py` ([JSON]({prefix}{READERS}); {p['rows']:,} rows, {p['days']} days, "
            f"{p['readers']} readers of the day before, through a Thrift Server; "
            f"{d['total_s']:.0f} s in all):"
        ),
        "",
        "| during the runs | classic | chain | chain / classic |",
        "|---|---|---|---|",
        f"| reads served per second (median over runs) | {k['reads_per_s_median']:.2f}"
        f" | {c['reads_per_s_median']:.2f} | {q['reads_per_s']:.2f} |",
        f"| longest read stall | {secs2(k['longest_stall_s'])} | {secs2(c['longest_stall_s'])}"
        f" | {q['longest_stall']:.2f} |",
        f"| slowest single read | {secs2(k['slowest_read_s'])} | {secs2(c['slowest_read_s'])} | - |",
        f"| failed reads, runs with a changed answer | {k['failed']}, {k['changed_answers']}"
        f" | {c['failed']}, {c['changed_answers']} | - |",
        f"| the dbt run itself (median) | {secs2(k['run_median_s'])} | {secs2(c['run_median_s'])}"
        f" | {q['run']:.2f} |",
    ]


def sweep_table(prefix: str) -> list[str]:
    """The break-even map (bench_sweep.py): the cycle cost per change rate and reads a day."""
    d = load(SWEEP)
    p, points = d["params"], d["points"]
    ks = list(points[0]["cycle"])
    return [
        para(
            f"Where a chain pays off: `bench_sweep.py` ([JSON]({prefix}{SWEEP}); {p['rows']:,} "
            f"rows, {p['days']} days, one bench_chain run per rate, the policy "
            f"`max_cumulative_ratio` chosen from the rate for {d['policy_reads_a_day']} reads a "
            "day). The cycle cost is every run of days 2..D plus k reads of each new day, chain / "
            "classic; below 1.0 the chain pays off:"
        ),
        "",
        "| keys changed a day | policy | compactions | "
        + " | ".join(f"k = {k}" for k in ks)
        + " | daily run | storage |",
        "|---|---|---|" + "---|" * len(ks) + "---|---|",
        *(
            f"| {pt['rate']:.1%} | {pt['max_cumulative_ratio']} | {len(pt['compact_days'])} | "
            + " | ".join(r3(pt["cycle"][k]) for k in ks)
            + f" | {r3(pt['daily_run'])} | {r3(pt['storage'])} |"
            for pt in points
        ),
        "",
        f"![the break-even map]({prefix}{SWEEP.replace('.json', '.png')})",
    ]


def run_statements(res: dict[str, Any]) -> int:
    """The statements of the chain's median daily run (days 2..D without a compaction)."""
    compacted = set(res["params"]["compact_days"])
    runs = [r for r in res["daily_runs"]["chain"][1:] if r["day"] not in compacted]
    return sorted(r["statements"]["count"] for r in runs)[(len(runs) - 1) // 2]


def groups_line(prefix: str) -> str:
    """The 16-group run at 10M again (bench_chain --quick) after the two changes for groups:
    the figures they changed."""
    quick, full = load(GROUPS_QUICK), load("bench_chain_n10000000_g16.json")
    q, f = quick["ratios"], full["ratios"]
    figures = [
        ("a new delta-only day via the view, avg / worst", "read_uncompacted_avg",
         "read_uncompacted_worst"),
        ("run + 3 reads", "daily_total", None),
        ("the cycle with 3 reads a day", "cycle_k3", None),
        ("the daily run", "daily_run", None),
    ]  # fmt: skip

    def pair(r: dict[str, Any], a: str, b: str | None) -> str:
        return r3(r.get(a)) + (f" / {r3(r.get(b))}" if b else "")

    return (
        "With 16 groups a served day's read probed the anchor's anti join with a string and a "
        "long, and a daily run asked each group's anchor for its location; since, the join has "
        "one long key and the anchors' record is read in one statement "
        f"([JSON]({prefix}{GROUPS_QUICK}), `--quick`: the daily runs and reads only): "
        + "; ".join(f"{text} {pair(q, a, b)} (before: {pair(f, a, b)})" for text, a, b in figures)
        + f"; {run_statements(quick)} statements a daily run (before: {run_statements(full)})."
    )


def server_table(prefix: str) -> list[str]:
    """bench_server.py: the chain and the classic job through a shared server."""
    runs = [(label, name, load(name)) for label, name in SERVERS]
    p = runs[0][2]["params"]
    rows = [
        ("daily run", "daily_run"),
        ("run + 3 reads of the day", "daily_total"),
        ("new delta-only day via the view, avg", "read_uncompacted_avg"),
        ("first load", "first_load"),
        ("cycle, 3 reads a day", "cycle_k3"),
    ]
    links = ", ".join(f"[{label}]({prefix}{name})" for label, name, _ in runs)
    return [
        para(
            f"Through a shared server: `bench_server.py` ({links}; {p['rows']:,} rows, "
            f"{p['days']} days, the server started by `scripts/spark-local.sh`, dbt and the "
            "reads its clients; chain / classic):"
        ),
        "",
        "| figure | " + " | ".join(label for label, _, _ in runs) + " | goal |",
        "|---|" + "---|" * len(runs) + "---|",
        *(
            f"| {text} | "
            + " | ".join(
                r3(res["ratios"].get(key)) + (" **missed**" if missed(res, [key]) else "")
                for _, _, res in runs
            )
            + f" | {goal_limits(runs[0][2], [key]) or '-'} |"
            for text, key in rows
        ),
        "| statements of a daily run, chain (classic) | "
        + " | ".join(
            f"{res['statements']['chain']['median_count']:.0f} "
            f"({res['statements']['baseline']['median_count']:.0f})"
            for _, _, res in runs
        )
        + " | - |",
    ]


def threads_table(prefix: str) -> list[str]:
    d = load(THREADS)
    p, q = d["params"], d["ratios"]
    t1, t4 = d["threads1"], d["threads4"]
    m = p["models"]
    return [
        para(
            f"`bench_threads.py` ([JSON]({prefix}{THREADS}); {m} chain and {m} classic models of "
            f"{p['rows']:,} rows, {p['days']} days; median daily wall time of each set):"
        ),
        "",
        f"| | {m} chain models | {m} classic models | chain / classic |",
        "|---|---|---|---|",
        f"| `--threads 1` | {secs2(t1['chain_median_s'])} | {secs2(t1['classic_median_s'])}"
        f" | {q['chain_over_classic_threads1']:.2f} |",
        f"| `--threads 4` | {secs2(t4['chain_median_s'])} | {secs2(t4['classic_median_s'])}"
        f" | {q['chain_over_classic_threads4']:.2f} |",
        f"| threads 4 / threads 1 | {q['chain_threads4_over_threads1']:.2f}"
        f" | {q['classic_threads4_over_threads1']:.2f} | |",
    ]


def results_parts(prefix: str) -> list[str]:
    """The tables of every headline file and the runs they come from; links start with `prefix`,
    the results directory as seen from the document."""
    runs = chain_runs()
    pairs = [(label, res) for label, _, res in runs]
    return [
        *chain_table(pairs),
        "",
        para(goals_summary(pairs) + " " + spread(pairs) + " The runs:"),
        "",
        *(para(run_line(label, name, res, prefix), "  ") for label, name, res in runs),
        "",
        *readers_table(prefix),
        "",
        *threads_table(prefix),
    ]


def performance_section() -> str:
    """README.md's Performance figures (between the performance markers): the headline sentence,
    the results, the headline run's chart."""
    head = load(HEADLINE)
    p = head["params"]
    return "\n".join(
        [
            para(
                f"The chain against the classic job that stores a full snapshot every day, both "
                f"run day by day in one process on a 2-core machine by "
                f"`benchmarks/bench_chain.py`; compaction by the model's policy "
                f"(`chain_compaction={{'max_chain_length': {p['compact_every']}}}`, inline). "
                f"Ratios are chain / classic; lower is better. In short: {headline(head)}."
            ),
            "",
            *results_parts("benchmarks/results/"),
            "",
            para(groups_line("benchmarks/results/")),
            "",
            *sweep_table("benchmarks/results/"),
            "",
            *server_table("benchmarks/results/"),
            "",
            para(planning_line(head)),
            "",
            f"![bench_chain at {millions(p['rows'])} rows: storage, daily runs, reads and "
            f"compaction against the classic job]"
            f"(benchmarks/results/{HEADLINE.replace('.json', '.png')})",
        ]
    )


def benchmarks_results() -> str:
    """benchmarks/README.md's current figures (between the results markers)."""
    return "\n".join(results_parts("results/"))


# (file, marker name, renderer, inline): an inline part sits inside a paragraph, on one line
PARTS = [
    (README, "headline", lambda: headline(load(HEADLINE)), True),
    (README, "performance", performance_section, False),
    (BENCH_README, "results", benchmarks_results, False),
]


def splice(text: str, name: str, body: str, inline: bool) -> str:
    """`text` with what lies between `<!-- name:begin ... -->` and `<!-- name:end -->` replaced."""
    pattern = re.compile(rf"(<!-- {name}:begin[^>]*-->)(.*?)(<!-- {name}:end -->)", flags=re.DOTALL)
    found = pattern.findall(text)
    if len(found) != 1:
        raise SystemExit(f"expected one pair of {name} markers, found {len(found)}")
    sep = "" if inline else "\n\n"
    return pattern.sub(lambda m: m.group(1) + sep + body + sep + m.group(3), text)


def rendered(path: Path) -> str:
    """The file at `path` with its generated parts as the results render them."""
    text = path.read_text()
    for file, name, render, inline in PARTS:
        if file == path:
            text = splice(text, name, render(), inline)
    return text


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the generated parts")
    mode.add_argument("--check", action="store_true", help="exit 1 if a file is out of date")
    args = ap.parse_args()
    if not (args.write or args.check):
        print(performance_section())
        return 0
    stale = []
    for path in (README, BENCH_README):
        new = rendered(path)
        if new != path.read_text():
            stale.append(path)
            if args.write:
                path.write_text(new)
    verb = "rewrote" if args.write else "out of date"
    for path in stale:
        print(f"{verb}: {path.relative_to(ROOT)}")
    if args.check and stale:
        print("run: python benchmarks/report.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
