"""The pages code writes (docs/configuration.md, docs/results.md, the README's results table) are current, and no
results table is older than the shipped artifacts it describes."""

from __future__ import annotations

import json
import shutil

import pytest

from grasp.lab.pages import configuration_page, pages, readme_results, report_dirs, stale_artifacts
from grasp.packaged import DATA
from tests.conftest import REPO


@pytest.mark.parametrize("path", ["docs/configuration.md", "docs/results.md", "README.md"])
def test_generated_pages_are_current(path):
    """Rerun `python scripts/build_docs.py` after changing the configuration or rerunning `grasp report`."""
    expected = pages(REPO)[REPO / path]
    assert (REPO / path).read_text(encoding="utf-8") == expected, f"{path} is stale: python scripts/build_docs.py"


def test_the_configuration_page_has_every_key_with_its_default():
    page = configuration_page()
    for row in ("| `search.depth` | int | `100` |", "| `fusion.depth` | int | `100` |",
                "| `reranker.train.epochs` | int | `2` |", "| `mfar.train.hard_negative_ranks` | tuple[int, int] | `[51, 100]` |"):
        assert row in page, row
    assert "## `[reranker.train]`" in page and "*(may change when an interrupted training run resumes)*" in page


def test_every_report_was_made_with_the_shipped_artifacts_it_describes():
    """A report's provenance names each trained artifact it read with its checksum; one shipped artifact changed
    since means the table (and the README's and docs' copies) is stale: rerun its `grasp report`."""
    dirs = report_dirs(REPO / "report")
    assert {d.name for d in dirs} >= {"bio", "pkg", "bio-untuned", "pkg-untuned"}
    for d in dirs:
        provenance = json.loads((d / "provenance.json").read_text())
        # the labelled recipe's reports read the shipped artifacts; those made with artifacts.shipped=false
        # (untuned, zero-label, synthetic queries only) read none, only what was trained into their workspace
        shipped = [name for name, made in provenance["artifacts"].items() if made["path"] != "workspace"]
        if "artifacts.shipped=false" in provenance["command"]:
            assert shipped == [], d
            if d.name.endswith(("-zero-label", "-untuned")):  # nothing trained at all
                assert provenance["artifacts"] == {}, d
        elif d.name in {"bio", "pkg"}:
            assert shipped, d
        assert stale_artifacts(provenance) == [], f"{d}: made before these artifacts changed; rerun " \
                                                  f"`{provenance['command']}`"


def test_a_changed_artifact_makes_its_report_stale(tmp_path):
    provenance = json.loads((REPO / "report" / "pkg" / "provenance.json").read_text())
    shipped = tmp_path / "data"
    shutil.copytree(DATA / "models" / "pkg", shipped / "models" / "pkg")
    assert stale_artifacts(provenance, shipped) == []
    name, made = next((n, m) for n, m in provenance["artifacts"].items() if m["path"].endswith(".json"))
    (shipped / made["path"]).write_text((shipped / made["path"]).read_text() + " ")
    assert stale_artifacts(provenance, shipped) == [f"{name} ({made['path']})"]


def test_the_readme_table_joins_both_reports():
    table = readme_results(REPO / "report")
    assert table.count("\n| ") == 8  # header + 7 stages
    assert "+ trained reranker (GRASP)" in table


def test_the_untuned_comparison_holds_only_the_stages():
    from grasp.lab.pages import untuned_comparison

    lines = untuned_comparison(REPO / "report")
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| stage")]
    assert len(rows) == 27  # seven stages on bio, pkg and pkg's unsampled templates, six on WordNet (no reranker)
    assert all(line.startswith("| + trained reranker (GRASP) | – | – |") for line in rows if "GRASP" in line)
