"""A bank of verified plans: solved questions shown to the planner as the worked examples nearest each new one.

A plan enters the bank when executing it put a gold answer among the graph's candidates (a train query's cached plan)
or when it is correct by construction (a synthesized query's); test and held-out queries never do. Plans are
deduplicated by *shape* (the plan with its anchor names and relevance text blanked), keeping a few phrasings of each.
At planning time the ``k`` banked questions most similar to the new one (by the encoder, optionally with the banked
questions' anchor names masked so that the question's shape is what matches) become its worked examples, shown after
the prompt's shared prefix.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from grasp.encode.encoder import Encoder
from grasp.errors import FormatError
from grasp.plan.prompt import Example
from grasp.storage import atomic_file, stable_hash, writable

BANK_FILE, BANK_RECORD = "bank.jsonl", "bank.json"


def normalize_text(text: str) -> str:
    """A question as two phrasings that differ only in case and spacing share it."""
    return " ".join(text.casefold().split())


@dataclass(frozen=True)
class BankEntry:
    """One verified plan: its question, the plan, and how it was verified."""

    qid: str
    query: str
    plan: dict
    source: str              # "train" (verified by execution) or "synthetic" (correct by construction)
    gold_rank: int | None = None   # rank of the best gold answer among the executed candidates (1 = first)
    n_cand: int | None = None

    @property
    def shape(self) -> str:
        return plan_shape(self.plan)

    @property
    def masked(self) -> str:
        return mask_anchors(self.query, self.plan)


def plan_shape(plan: dict) -> str:
    """The plan with what a question fills in blanked (anchor names, relevance text): two questions of one shape
    differ only in those."""
    anchors = [{k: v for k, v in a.items() if k != "text"} for a in plan.get("anchors", [])]
    target = {**plan.get("target", {}), "relevance_text": bool(plan.get("target", {}).get("relevance_text"))}
    return json.dumps({"anchors": anchors, "hops": plan.get("hops", []), "target": target}, sort_keys=True)


def mask_anchors(query: str, plan: dict) -> str:
    """The question with each anchor's name replaced by its type in angle brackets ("genes linked to <gene>")."""
    out = query
    for a in sorted(plan.get("anchors", []), key=lambda a: -len(a.get("text", ""))):
        text = a.get("text", "")
        if a.get("match_mode", "name") == "name" and len(text) >= 2:
            out = re.sub(re.escape(text), f"<{a.get('label', 'name')}>", out, flags=re.IGNORECASE)
    return out


def deduplicate(entries: Sequence[BankEntry], per_shape: int) -> list[BankEntry]:
    """At most ``per_shape`` entries of each shape (the best-verified first: gold ranked highest, then the
    fewest candidates), and each question once."""
    def quality(e: BankEntry) -> tuple:
        return (e.source != "train", e.gold_rank or 10**9, e.n_cand or 10**9, e.qid)

    seen_queries: set[str] = set()
    per: dict[str, int] = {}
    kept = []
    for e in sorted(entries, key=quality):
        key = normalize_text(e.query)
        if key in seen_queries or per.get(e.shape, 0) >= per_shape:
            continue
        seen_queries.add(key)
        per[e.shape] = per.get(e.shape, 0) + 1
        kept.append(e)
    return sorted(kept, key=lambda e: e.qid)


@dataclass
class PlanBank:
    """Verified plans and what they were made from; :meth:`nearest` picks a question's worked examples."""

    entries: list[BankEntry]
    provenance: dict = field(default_factory=dict)

    @property
    def version(self) -> str:
        """A digest of the bank's questions and plans: a plan made with its examples is cached under it."""
        return stable_hash([[e.qid, e.query, e.plan] for e in self.entries])

    def save(self, folder: Path) -> Path:
        """Write ``bank.jsonl`` and its record ``bank.json`` into ``folder`` (each atomically)."""
        with writable(Path(folder)):
            Path(folder).mkdir(parents=True, exist_ok=True)
        path = Path(folder) / BANK_FILE
        with atomic_file(path, "w", encoding="utf-8") as f:
            for e in self.entries:
                f.write(json.dumps(asdict(e), ensure_ascii=False) + "\n")
        with atomic_file(Path(folder) / BANK_RECORD, "w", encoding="utf-8") as f:
            json.dump({**self.provenance, "entries": len(self.entries), "version": self.version,
                       "shapes": len({e.shape for e in self.entries})}, f, indent=1)
        return path

    @classmethod
    def load(cls, folder: Path) -> PlanBank | None:
        """The bank saved in ``folder``, or None where there is none."""
        path = Path(folder) / BANK_FILE
        if not path.exists():
            return None
        entries = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                entries.append(BankEntry(str(r["qid"]), r["query"], r["plan"], r["source"], r.get("gold_rank"),
                                         r.get("n_cand")))
            except (ValueError, KeyError, TypeError) as e:
                raise FormatError(f"{path}:{n}: not a bank entry ({type(e).__name__}: {e}); delete the file and run "
                                  "`grasp plans bank` again") from None
        record = Path(folder) / BANK_RECORD
        provenance = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
        return cls(entries, provenance)


class ExampleRetriever:
    """The ``k`` banked questions nearest a query, as worked examples (most similar last, next to the query)."""

    def __init__(self, bank: PlanBank, encoder: Callable[[], Encoder] | Encoder, *, k: int = 4,
                 match: str = "masked") -> None:
        """``encoder``: the encoder, or a factory of it called on the first query (a replayed plan needs none)."""
        if match not in ("masked", "query"):
            raise ValueError(f"match must be 'masked' or 'query', not {match!r}")
        self.bank, self.k, self.match = bank, k, match
        self._encoder = encoder
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()  # the planner's threads ask at once; a tokenizer is not shared safely
        self.tag = f"bank:{bank.version}:k{k}:{match}"   # enters the plan cache key

    @property
    def encoder(self) -> Encoder:
        if not isinstance(self._encoder, Encoder):
            self._encoder = self._encoder()
        return self._encoder

    def _matrix(self) -> np.ndarray:
        if self._vectors is None:
            texts = [e.masked if self.match == "masked" else e.query for e in self.bank.entries]
            self._vectors = np.asarray(self.encoder.encode(texts), dtype=np.float32)
        return self._vectors

    def examples(self, query: str) -> list[Example]:
        """The nearest banked questions (never the query itself), most similar last; ties by bank order."""
        if not self.bank.entries or self.k == 0:
            return []
        with self._lock:
            q = np.asarray(self.encoder.encode_queries([query]), dtype=np.float32)[0]
            scores = self._matrix() @ q
        own = normalize_text(query)
        order = [i for i in np.lexsort((np.arange(scores.size), -scores))
                 if normalize_text(self.bank.entries[i].query) != own][: self.k]
        return [Example(self.bank.entries[i].qid, self.bank.entries[i].query, self.bank.entries[i].plan)
                for i in reversed(order)]
