"""Build the planner's chat prompt from readable template files (``prompts/``).

System prompt = role + KB schema (generated from the SKB's own schema, with example names)
+ plan structure + dataset guidance + worked examples + the fusion-control block. The user
message holds the query. The system prompt is identical for every query of an SKB, so a
local model reuses its computed prefix and only reads the short user message each time.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from string import Template

from grasp.errors import GraspError
from grasp.plan.nested import flat_to_nested
from grasp.skb.graph import SKB
from grasp.skb.schema import Schema

PROMPTS = Path(__file__).parent / "prompts"

# guidance file per prompt profile (an SKB's ``prompt_profile`` in schema.json, else its name)
GUIDANCE = {"stark-mag": "mag", "stark-amazon": "amazon", "stark-prime": "prime"}


def _template(name: str) -> Template:
    return Template((PROMPTS / name).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Example:
    qid: str
    query: str
    plan: dict


def profile_of(skb: SKB) -> str:
    extra = skb.schema.model_extra or {}
    return str(extra.get("prompt_profile") or skb.schema.name)


def load_examples(profile: str) -> list[Example]:
    """The worked examples for a profile (``prompts/examples/<profile>.jsonl``), if any."""
    path = PROMPTS / "examples" / f"{profile}.jsonl"
    return read_examples(path) if path.exists() else []


def read_examples(path: Path) -> list[Example]:
    """Worked examples from a JSONL file, one {qid, query, plan} a line; a problem is one error naming the line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise GraspError(f"{path}: cannot read the worked examples ({e})") from None
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise GraspError(f"{path}, line {number}: not JSON ({e.msg})") from None
        missing = [key for key in ("qid", "query", "plan") if not isinstance(row, dict) or key not in row]
        if missing:
            raise GraspError(f"{path}, line {number}: a worked example needs {', '.join(missing)}")
        if not isinstance(row["query"], str) or not isinstance(row["plan"], dict):
            raise GraspError(f"{path}, line {number}: 'query' must be a string and 'plan' an object")
        out.append(Example(str(row["qid"]), row["query"], row["plan"]))
    return out


def _undirected(plan: dict) -> dict:
    """A worked example as the flat format shows it: without hop directions (its prompt, and so the
    shipped flat plans' cache keys, predate them)."""
    return {**plan, "hops": [{k: v for k, v in h.items() if k != "dir"} for h in plan.get("hops", [])]}


class PromptBuilder:
    """Renders (system, user) messages for one SKB."""

    def __init__(self, skb: SKB, *, examples: list[Example] | None = None, guidance: str | None = None,
                 names_per_type: int = 4, max_examples: int = 12, retrieval_mode: bool | None = None,
                 plan_format: str = "flat") -> None:
        """``plan_format``: the plan the model writes, "flat" (anchors, hops, target) or "nested" (a tree
        rooted at the target, :mod:`grasp.plan.nested`); the worked examples are shown in it."""
        if plan_format not in ("flat", "nested"):
            raise ValueError(f"plan_format must be 'flat' or 'nested', not {plan_format!r}")
        self.plan_format = plan_format
        self.skb = skb
        profile = profile_of(skb)
        self.profile = profile
        self.examples = (examples if examples is not None else load_examples(profile))[:max_examples]
        guidance_name = guidance or GUIDANCE.get(profile, "generic")
        self.guidance = (PROMPTS / "guidance" / f"{guidance_name}.md").read_text(encoding="utf-8")
        self.retrieval_mode = profile == "stark-amazon" if retrieval_mode is None else retrieval_mode
        self.names_per_type = names_per_type
        self.system = self._system()
        self._system_unlinked: str | None = None  # the system prompt when the schema goes with each query instead
        self.hash = hashlib.sha256((self.system + "\x00" + _template("user.md").template).encode()).hexdigest()[:16]

    def _schema_block(self, schema: Schema | None = None) -> str:
        """The schema as the prompt shows it: the whole one, or a linked part (:mod:`grasp.plan.schema_link`)."""
        skb = self.skb
        schema = schema or skb.schema
        lines = []
        for t in [t for t in skb.schema.type_names if t in schema.node_types]:
            ids = skb.nodes_of_type(t)
            # a deterministic spread of example names: evenly spaced through the type's nodes
            picks = ids[:: max(1, len(ids) // self.names_per_type)][: self.names_per_type] if len(ids) else []
            names = ", ".join(json.dumps(skb.names[i], ensure_ascii=False) for i in picks)
            lines.append(f"- {t} ({len(ids):,} nodes), e.g. {names}")
        arrow = "->" if self.plan_format == "nested" else "-"  # the nested format can say which way an edge runs
        rels = [f"- {r.source} -[{r.name}]{arrow} {r.target}" + (f": {r.description}" if r.description else "")
                for r in schema.relations]
        return _template("schema.md").substitute(
            kb_name=schema.name, kb_description=schema.description or "",
            node_types="\n".join(lines), relations="\n".join(rels),
            candidate_types=", ".join(schema.candidate_types),
        )

    def _examples_block(self, examples: list[Example] | None = None, header: str = "examples_header.md") -> str:
        examples = self.examples if examples is None else examples
        if not examples:
            return ""
        parts = [(PROMPTS / header).read_text(encoding="utf-8").strip()]
        for ex in examples:
            plan = flat_to_nested(ex.plan) if self.plan_format == "nested" else _undirected(ex.plan)
            parts.append(f"Query: {ex.query}\nPlan: {json.dumps(plan, ensure_ascii=False)}")
        return "\n\n".join(parts)

    def _system(self, with_schema: bool = True) -> str:
        blocks = [
            (PROMPTS / "role.md").read_text(encoding="utf-8").strip(),
            self._schema_block().strip() if with_schema else "",
            (PROMPTS / ("structure_nested.md" if self.plan_format == "nested" else "structure.md"))
            .read_text(encoding="utf-8").strip(),
            self.guidance.strip(),
            self._examples_block(),
            (PROMPTS / "fusion.md").read_text(encoding="utf-8").strip(),
        ]
        return "\n\n".join(b for b in blocks if b)

    def messages(self, query: str, examples: list[Example] | None = None,
                 schema: Schema | None = None) -> list[dict[str, str]]:
        """The chat for one query; ``examples``: worked examples chosen for this query (a bank's nearest), and
        ``schema``: the part of the schema linked to it; both are shown in the user message, after the system prompt
        every query shares (a local model's cached prefix), which then leaves the schema out."""
        user = _template("user.md").substitute(query=query).strip()
        if examples:
            user = self._examples_block(examples, "nearest_header.md") + "\n\n" + user
        if schema is None:
            return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]
        if self._system_unlinked is None:
            self._system_unlinked = self._system(with_schema=False)
        user = self._schema_block(schema).strip() + "\n\n" + user
        return [{"role": "system", "content": self._system_unlinked}, {"role": "user", "content": user}]
