"""The break-even map: where a chain pays off, by change rate and reads a day.

    .venv/bin/python benchmarks/bench_sweep.py [--rows 2000000 --rates 0.001 0.01 0.05 0.2]

One bench_chain.py run per change rate (each its own process and JVM, one after another,
`--quick`: the daily runs and the reads of each new day), the chain's policy set as a user
would: `max_cumulative_ratio` from the rate and 3 reads a day (cycle.policy_ratio, which says
how). From each run's days the cycle cost (cycle.py: every run of days 2..D, compaction days
included, plus k reads of each new day, chain / classic) for k in 1, 3 and 10: a point's k
figures come from the same run, read k times. Writes bench_sweep_n<rows>.json + .png into
--out; every run's own JSON stays beside them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import require_matplotlib
from cycle import READS_A_DAY, policy_ratio

HERE = Path(__file__).resolve().parent
POLICY_READS = 3  # the reads a day the policy is chosen for


def run_point(args: argparse.Namespace, rate: float, out: Path) -> dict[str, Any]:
    """One bench_chain.py run at `rate`; its figures and the sweep's own."""
    policy = policy_ratio(rate, POLICY_READS)
    cmd = [
        sys.executable,
        str(HERE / "bench_chain.py"),
        "--quick",
        f"--rows={args.rows}",
        f"--days={args.days}",
        f"--rate={rate}",
        f"--max-cumulative-ratio={policy}",
        f"--driver-memory={args.driver_memory}",
        f"--out={out}",
    ]
    print(f"rate {rate}: max_cumulative_ratio {policy}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    res = json.loads((out / "bench_chain_g1.json").read_text())
    cycle = res["ratios"]  # bench_chain records cycle.cycle_ratios of its days
    return {
        "rate": rate,
        "max_cumulative_ratio": policy,
        "compact_days": res["params"]["compact_days"],
        "cycle": {str(k): cycle[f"cycle_k{k}"] for k in READS_A_DAY},
        "storage": res["ratios"]["storage"],
        "daily_run": res["ratios"]["daily_run"],
        "read_new_day_avg": res["ratios"].get("read_uncompacted_avg"),
        "read_new_day_worst": res["ratios"].get("read_uncompacted_worst"),
        "full_load": res["full_load_s"]["chain"] / res["full_load_s"]["baseline"],
        "wall_s": time.perf_counter() - t0,
    }


def chart(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = result["points"]
    rates = [p["rate"] * 100 for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k in READS_A_DAY:
        ax.plot(rates, [p["cycle"][str(k)] for p in points], marker="o", label=f"{k} read(s) a day")
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.text(rates[0], 1.02, "break-even", color="grey", fontsize=8)
    ax.set_xscale("log")
    ax.set_xticks(rates, [f"{r:g} %" for r in rates])
    ax.set_xlabel("keys changed a day")
    ax.set_ylabel("cycle cost, chain / classic (lower is better)")
    ax.set_title(
        f"Where a chain pays off: {result['params']['rows']:,} rows, {result['params']['days']} days"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.001, 0.01, 0.05, 0.2])
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--out", default=str(HERE / "out"))
    args = ap.parse_args()
    require_matplotlib(ap)
    out = Path(args.out).resolve()
    points = [run_point(args, rate, out / f"sweep_r{rate:g}") for rate in args.rates]
    result = {"params": vars(args), "policy_reads_a_day": POLICY_READS, "points": points}
    name = f"bench_sweep_n{args.rows}"
    (out / f"{name}.json").write_text(json.dumps(result, indent=2))
    chart(result, out / f"{name}.png")
    print(
        f"{'rate':>8} {'policy':>7} {'compactions':>11} "
        + " ".join(f"{f'k={k}':>7}" for k in READS_A_DAY)
    )
    for p in points:
        print(
            f"{p['rate']:8.3%} {p['max_cumulative_ratio']:7.3f} {len(p['compact_days']):11d} "
            + " ".join(f"{p['cycle'][str(k)]:7.3f}" for k in READS_A_DAY)
        )
    print(f"wrote {out / name}.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
