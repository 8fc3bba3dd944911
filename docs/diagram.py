"""Draws docs/chain.png, the README's picture of a chain table: the snapshot and delta branches
of one group over 14 days, and how the read of one day merges its anchor with the deltas after
it (docs/design.md#read-rules, rules 1-3).

    .venv/bin/pip install matplotlib && .venv/bin/python docs/diagram.py
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

DAYS = range(1, 15)
SNAPSHOTS = (1, 8)  # day 1: the first run; day 8: compact_chain
READ_DAY = 12
ANCHOR = max(s for s in SNAPSHOTS if s < READ_DAY)
ROWS = {"snapshot": 3.0, "delta": 2.0, "cumulative": 1.0}
BLUE, ORANGE, GREEN, GREY = "#3b6ea8", "#e08a2c", "#4a9a5b", "#c9c9c9"


def box(ax, x: float, y: float, text: str, color: str, width: float = 0.8, alpha: float = 1.0):
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - 0.3),
            width,
            0.6,
            boxstyle="round,pad=0.02",
            facecolor=color,
            edgecolor="black",
            linewidth=0.6,
            alpha=alpha,
        )
    )
    ax.text(
        x, y, text, ha="center", va="center", fontsize=7, color="white" if alpha > 0.6 else "black"
    )


def arrow(ax, start: tuple[float, float], end: tuple[float, float], color: str) -> None:
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=9,
            color=color,
            linewidth=1.1,
            connectionstyle="arc3,rad=-0.15",
            zorder=0.5,
        )
    )


def draw(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(11, 4.6))
    ax.set_xlim(-2.6, 15.2)
    ax.set_ylim(-0.9, 3.9)
    ax.axis("off")
    labels = {
        "snapshot": "t__snapshot\n(snapshot branch:\nfull states)",
        "delta": "t__delta\n(delta branch:\neach day's changes)",
        "cumulative": "t__cumulative\n(derived: changes since\nthe anchor, merged)",
    }
    for name, y in ROWS.items():
        ax.text(-2.5, y, labels[name], ha="left", va="center", fontsize=8)
        ax.plot(
            [0.4, 14.6], [y, y], color="#eeeeee", linewidth=14, zorder=0, solid_capstyle="round"
        )
    for day in DAYS:
        ax.text(day, 3.65, f"day {day}", ha="center", fontsize=7)
    for day in SNAPSHOTS:
        used = day == ANCHOR
        box(
            ax,
            day,
            ROWS["snapshot"],
            "anchor" if used else "full",
            BLUE,
            alpha=1.0 if used else 0.55,
        )
    for day in DAYS[1:]:
        used = ANCHOR < day <= READ_DAY
        box(ax, day, ROWS["delta"], f"Δ{day}", ORANGE, alpha=1.0 if used else 0.35)
    for day in DAYS:
        if day > ANCHOR:
            used = day == READ_DAY
            box(
                ax,
                day,
                ROWS["cumulative"],
                f"Σ{ANCHOR + 1}..{day}",
                GREEN,
                width=0.9,
                alpha=1.0 if used else 0.35,
            )
    ax.annotate(
        "",
        (READ_DAY, ROWS["cumulative"] + 0.3),
        xytext=(ANCHOR + 1, ROWS["delta"] - 0.3),
        arrowprops=dict(arrowstyle="->", linewidth=0.7, color=GREEN),
    )
    ax.annotate(
        "compact_chain\n(day 8's merged state)",
        (8, ROWS["snapshot"] + 0.3),
        xytext=(5.6, 3.95),
        fontsize=7,
        arrowprops=dict(arrowstyle="->", linewidth=0.7),
    )
    ax.text(
        8,
        ROWS["delta"] - 0.48,
        "not read: the anchor's own day",
        ha="center",
        fontsize=6.5,
        color="#555555",
    )

    # the merged read of READ_DAY
    target = (READ_DAY + 1.7, -0.45)
    box(ax, target[0], target[1], f"day {READ_DAY}: full state", "#333333", width=2.4)
    arrow(ax, (ANCHOR, ROWS["snapshot"] - 0.3), (target[0] - 1.0, target[1] + 0.3), BLUE)
    arrow(ax, (READ_DAY, ROWS["cumulative"] - 0.3), (target[0] - 0.3, target[1] + 0.3), GREEN)
    ax.text(
        -2.5,
        -0.45,
        f"select * from t where dt = <day {READ_DAY}>:  anchor = nearest snapshot strictly before "
        f"the day (day {ANCHOR}),\nmerged per primary key with every delta in (day {ANCHOR}, day "
        f"{READ_DAY}]; the cumulative delta Σ holds that merge, written by day {READ_DAY}'s run.\n"
        "A day in the snapshot branch is read as it is; a day before any snapshot merges all its deltas.",
        fontsize=7.5,
        va="center",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=130)


if __name__ == "__main__":
    draw(Path(__file__).with_name("chain.png"))
