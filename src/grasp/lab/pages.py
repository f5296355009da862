"""Documentation pages written by code, so that they cannot drift from it: every configuration key from the typed
configuration, and the results from what `grasp report` wrote (with the command, the code version and the
checksums of the trained artifacts each table was made with).

``python scripts/build_docs.py`` writes them; ``--check`` (and ``tests/unit/test_docs.py``) says which are stale.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from types import UnionType
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from grasp.config import GraspConfig, marked
from grasp.errors import FormatError
from grasp.packaged import DATA
from grasp.storage import checksum

README_BEGIN = "<!-- results: written by scripts/build_docs.py from report/*/ablation.md -->"
README_END = "<!-- end of results -->"
KBS = ("bio", "pkg")  # the knowledge bases whose reports the README's table joins


# --- configuration ------------------------------------------------------------------------------

def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    if origin in (typing.Union, UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{origin.__name__}[{args}]"
    if annotation is Ellipsis:  # tuple[X, ...]: any number of X
        return "..."
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _default(field) -> str:
    value = field.default
    if value is PydanticUndefined:
        return "(required)"
    if isinstance(value, BaseModel):
        return "(section)"
    return f"`{json.dumps(value if not isinstance(value, tuple) else list(value), default=str)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _section_rows(model: type[BaseModel], prefix: str) -> tuple[list[str], list[tuple[str, type[BaseModel]]]]:
    rows, subsections = [], []
    resumable, serving = marked(model, "resumable"), marked(model, "serving_only")
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            subsections.append((f"{prefix}{name}", annotation))
            continue
        notes = [field.description or ""]
        if name in resumable:
            notes.append("*(may change when an interrupted training run resumes)*")
        if name in serving:
            notes.append("*(how a trained reranker is served, not what it is)*")
        rows.append(f"| `{prefix}{name}` | {_type_name(annotation)} | {_default(field)} | "
                    f"{_cell(' '.join(n for n in notes if n))} |")
    return rows, subsections


def configuration_page() -> str:
    """Every configuration key: its section, type, default and meaning, from :class:`grasp.config.GraspConfig`."""
    lines = ["# Configuration", "",
             "Every key of `grasp.config.GraspConfig`, generated from the typed configuration by "
             "`python scripts/build_docs.py` (a test fails when this page and the code differ).", "",
             "Values come from, in increasing priority: the defaults below, a TOML file (`--config FILE`, one "
             "`[section]` per table below) and `--set section.key=value` overrides (values parse as JSON, else "
             "as text: `--set mfar.dense_fields='[\"name\"]'`). In Python: `GraspConfig(...)`, "
             "`grasp.load_config(path, overrides)`, or `Searcher.open(skb, overrides=[...])`.", ""]
    queue: list[tuple[str, type[BaseModel]]] = [("", GraspConfig)]
    while queue:
        prefix, model = queue.pop(0)
        rows, subsections = _section_rows(model, f"{prefix}." if prefix else "")
        title = f"`[{prefix}]`" if prefix else "Top level"
        doc = (model.__doc__ or "").strip() if prefix else ""
        lines += [f"## {title}", ""]
        if doc:
            lines += [" ".join(doc.split()), ""]
        if rows:
            lines += ["| key | type | default | meaning |", "|---|---|---|---|", *rows, ""]
        queue = subsections + queue
    return "\n".join(lines).rstrip() + "\n"


# --- results ------------------------------------------------------------------------------------

def read_report(report_dir: Path) -> tuple[str, dict]:
    """(ablation.md, provenance.json) of one `grasp report` output folder."""
    for name in ("ablation.md", "provenance.json"):
        if not (report_dir / name).exists():
            raise FormatError("no such file: a report folder holds what `grasp report --out DIR` writes",
                              file=report_dir / name)
    return (report_dir / "ablation.md").read_text(encoding="utf-8"), \
        json.loads((report_dir / "provenance.json").read_text(encoding="utf-8"))


def stale_artifacts(provenance: dict, shipped_root: Path = DATA) -> list[str]:
    """The shipped artifacts a report read that have changed (or gone) since: its tables are older than them."""
    stale = []
    for name, made in provenance.get("artifacts", {}).items():
        if made["path"] == "workspace":
            continue
        path = shipped_root / made["path"]
        if not path.exists() or checksum(path) != made["sha256"]:
            stale.append(f"{name} ({made['path']})")
    return stale


def report_dirs(report_root: Path) -> list[Path]:
    return sorted(d for d in report_root.iterdir() if (d / "provenance.json").exists()) if report_root.exists() else []


def results_page(report_root: Path) -> str:
    """Each knowledge base's `grasp report` tables, with what made them."""
    lines = ["# Results", "",
             "The current tables, copied from what `grasp report` wrote under `report/` by `python "
             "scripts/build_docs.py`. Each says the command and the code version that made it; `provenance.json` "
             "beside it holds the checksum of every trained artifact it read, and a test fails when a shipped "
             "artifact has changed since (the table is then older than what it describes: rerun the command). "
             "How each shipped setting was chosen, on validation only: [experiments.md](experiments.md).", ""]
    for d in report_dirs(report_root):
        text, provenance = read_report(d)
        rel = d.relative_to(report_root.parent).as_posix()
        body = text.split("\n", 1)[1] if text.startswith("# ") else text
        name = provenance["skb"]["name"]
        source = f"from `../shared/data/skb/{name}`" if name in KBS else f"`{name}`, made as [defaults.md](defaults.md#a-knowledge-base-from-outside-wordnet) says"
        lines += [f"## {text.splitlines()[0].removeprefix('# ')}", "", f"Command: `{provenance['command']}` "
                  f"(the KB {source}, fingerprint {provenance['skb']['fingerprint']}); code: {provenance['code']}. "
                  f"Figures: [{rel}/](../{rel}/).", "",
                  body.strip().replace("\n## ", "\n### "), ""]
        if provenance["artifacts"]:
            lines += ["| trained artifact | shipped as | sha256 |", "|---|---|---|",
                      *(f"| {name} | `{made['path']}` | `{made['sha256'][:16]}` |"
                        for name, made in provenance["artifacts"].items()), ""]
        else:
            lines += ["No trained artifact was read: every tuned part ran on its untuned default.", ""]
    lines += untuned_comparison(report_root)
    return "\n".join(lines).rstrip() + "\n"


# a KB's reports side by side, by the suffix of their folder: what each was trained and planned on
COLUMNS = (("-zero-label", "zero-label defaults"), ("-untuned", "defaults, labelled KB's plans"),
           ("-synthetic", "synthetic queries only"), ("", "labelled recipe"))


def untuned_comparison(report_root: Path) -> list[str]:
    """For each KB reported more than one way (zero-label defaults, defaults with the labelled KB's plans, trained
    on synthetic queries, the labelled recipe): every stage's test Hit@1 and MRR side by side."""
    lines = []
    kbs = dict.fromkeys(next(d.name.removesuffix(x) for x, _ in COLUMNS if d.name.endswith(x))
                        for d in report_dirs(report_root))  # a KB reported only in some ways is there too
    for kb in kbs:
        found = [(title, report_root / f"{kb}{suffix}") for suffix, title in COLUMNS
                 if (report_root / f"{kb}{suffix}" / "provenance.json").exists()]
        if len(found) < 2:
            continue
        tables = [(title, _ablation_rows(read_report(d)[0])) for title, d in found]
        split = re.search(r"split (\w+)", read_report(found[0][1])[0].splitlines()[0])
        lines += [f"### {kb} ({split.group(1) if split else 'test'} Hit@1 / MRR, %)", "",
                  "| stage | " + " | ".join(title for title, _ in tables) + " |",
                  "|---|" + "---:|" * len(tables)]
        for label in max((t for _, t in tables), key=len):
            cells = [f"{t[label][0]} / {t[label][3]}" if label in t else "–" for _, t in tables]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    return ["## A knowledge base nobody labelled, beside the labelled recipe", "",
            "Each KB reported on held-out queries (bio's and pkg's test split; for a KB with no labelled queries at "
            "all, such as the WordNet slice of [defaults.md](defaults.md), synthetic queries it was not trained on) as "
            "a KB nobody labelled would be: *zero-label defaults* (every "
            "shipped artifact off, `artifacts.shipped=false`, and the planner shown none of the KB's hand-written "
            "examples, `planner.examples=none`); *defaults, labelled KB's plans* (artifacts off, plans replayed from "
            "the shipped caches, made with the hand-written examples); *synthetic queries only* (trained and tuned on "
            "`grasp synthesize`'s queries, planned with their examples); and the *labelled recipe*. How the defaults "
            "were chosen: [defaults.md](defaults.md).", "", *lines] if lines else []


def _ablation_rows(text: str) -> dict[str, list[str]]:
    """{method label: [hit@1, hit@5, recall@20, mrr]} from a report's ablation table (its first section)."""
    rows = {}
    for line in text.split("\n## ")[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.fullmatch(r"[\d.]+", cells[2] or ""):
            rows[cells[0]] = cells[2:]
    return rows


def readme_results(report_root: Path, kbs: tuple[str, ...] = KBS) -> str:
    """The README's one results table: every stage on each KB's test split, side by side."""
    reports = {kb: read_report(report_root / kb) for kb in kbs}
    tables = {kb: _ablation_rows(text) for kb, (text, _) in reports.items()}
    labels = list(tables[kbs[0]])
    head = "| method | " + " | ".join(f"{kb} Hit@1 | Hit@5 | R@20 | MRR" for kb in kbs) + " |"
    lines = [README_BEGIN, head, "|---|" + "---:|" * 4 * len(kbs)]
    for label in labels:
        cells = [c for kb in kbs for c in tables[kb].get(label, ["–"] * 4)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    commands = "; ".join(f"`{provenance['command']}`" for _, provenance in reports.values())
    lines += ["", f"Made by {commands}, written here by `python scripts/build_docs.py`.", README_END]
    return "\n".join(lines)


def with_readme_results(readme: str, table: str) -> str:
    """The README with its results block replaced by ``table``."""
    start, end = readme.index(README_BEGIN), readme.index(README_END) + len(README_END)
    return readme[:start] + table + readme[end:]


def pages(repo: Path) -> dict[Path, str]:
    """Every generated page of the repository at ``repo``, by path: what its file should hold."""
    report_root = repo / "report"
    readme = (repo / "README.md").read_text(encoding="utf-8")
    return {repo / "docs" / "configuration.md": configuration_page(),
            repo / "docs" / "results.md": results_page(report_root),
            repo / "README.md": with_readme_results(readme, readme_results(report_root))}
