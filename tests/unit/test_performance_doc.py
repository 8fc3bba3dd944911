"""The benchmark figures of README.md and benchmarks/README.md are what benchmarks/report.py renders
from the committed JSON of benchmarks/results/: a new results file committed without
`python benchmarks/report.py --write` fails here. Reads files only, no Spark."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_report():
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = load_report()


@pytest.mark.parametrize("path", [report.README, report.BENCH_README], ids=lambda p: p.name)
def test_generated_parts_match_the_results(path: Path) -> None:
    assert path.read_text() == report.rendered(path), (
        f"{path.relative_to(ROOT)} differs from benchmarks/results/: run "
        "`python benchmarks/report.py --write`"
    )


def test_the_headline_is_the_tables_figures() -> None:
    """The intro's sentence and the Performance section's table give the same daily run."""
    res = json.loads((report.RESULTS / report.HEADLINE).read_text())
    text = report.README.read_text()
    intro = text[text.index("<!-- headline:begin") : text.index("<!-- headline:end")]
    section = text[text.index("<!-- performance:begin") : text.index("<!-- performance:end")]
    assert f"a daily run costs {res['ratios']['daily_run']:.2f}x" in intro
    assert f"| {res['ratios']['daily_run']:.3f} (" in section


def test_a_changed_result_makes_the_readme_stale(tmp_path: Path, monkeypatch) -> None:
    for f in report.RESULTS.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    head = tmp_path / report.HEADLINE
    res = json.loads(head.read_text())
    res["ratios"]["daily_run"] += 0.01
    head.write_text(json.dumps(res))
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    assert report.rendered(report.README) != report.README.read_text()


def test_links_of_the_generated_parts_exist() -> None:
    for path in (report.README, report.BENCH_README):
        for target in re.findall(r"\]\(((?:benchmarks/)?results/[^)]+)\)", path.read_text()):
            assert (path.parent / target).is_file(), f"{path.name} links to missing {target}"


def test_benchmarks_readme_stays_short() -> None:
    assert len(report.BENCH_README.read_text().splitlines()) <= 200


def test_missing_markers_are_an_error() -> None:
    with pytest.raises(SystemExit, match="results markers"):
        report.splice("no markers here", "results", "body", inline=False)
