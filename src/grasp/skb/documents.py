"""Text views of a node: the full document, the name-only text, and the reranker serialization.

A *layout* turns a node into its full document. The generic layout serves any open-format SKB;
the three STaRK layouts follow the text layouts of STaRK's own ``get_doc_info`` (without the
relation block), so that embeddings and BM25 see the documents STaRK's baselines saw.
Each layout has a version that is part of every cache key built from its text.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from grasp.skb.graph import SKB


def render_value(value: Any) -> str:
    """A field value as one line of text: lists joined by ', ', dicts as 'key: value; ...'."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ", ".join(s for s in (render_value(v) for v in value) if s)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {render_value(v)}" for k, v in value.items() if render_value(v))
    if isinstance(value, float) and value != value:  # NaN
        return ""
    return str(value)


def _label(field: str) -> str:
    return field.replace("_", " ")


class DocumentLayout(ABC):
    """Turns a node into text. ``name``/``version`` identify the layout in cache keys."""

    name: str = ""
    version: int = 1

    @property
    def key(self) -> str:
        return f"{self.name}-v{self.version}"

    @abstractmethod
    def document(self, skb: SKB, node: int) -> str:
        """The full document of ``node`` (name, type and text fields)."""

    def text_fields(self, skb: SKB, node: int) -> dict[str, str]:
        """The node's text fields in schema order, rendered as strings (empty ones dropped)."""
        spec = skb.schema.node_types[skb.type_of(node)]
        values = skb.fields[node]
        out = {}
        for f in spec.text_fields:
            text = render_value(values.get(f))
            if text.strip():
                out[f] = text
        return out


class GenericLayout(DocumentLayout):
    """``name: X`` / ``type: T`` / one ``field: value`` line per non-empty text field."""

    name = "generic"

    def document(self, skb: SKB, node: int) -> str:
        lines = [f"name: {skb.names[node]}", f"type: {_label(skb.type_of(node))}"]
        lines += [f"{_label(f)}: {v}" for f, v in self.text_fields(skb, node).items()]
        return "\n".join(lines)


class StarkAmazonLayout(DocumentLayout):
    """STaRK Amazon: product title, brand, dimensions, description, features, top reviews, Q&A."""

    name = "stark-amazon"
    max_entries = 25

    def document(self, skb: SKB, node: int) -> str:
        t = skb.type_of(node)
        if t != "product":
            return f"{t} name: {skb.names[node]}"
        info = skb.fields[node]
        doc = f"- product: {skb.names[node]}\n"
        if info.get("brand"):
            doc += f"- brand: {info['brand']}\n"
        dims = _nested(info, "details", "dictionary", "product_dimensions")
        if isinstance(dims, str) and " ; " in dims:
            d, w = dims.split(" ; ", 1)
            doc += f"- dimensions: {d}\n- weight: {w}\n"
        description = " ".join(_as_list(info.get("description"))).strip(" ")
        if description:
            doc += f"- description: {description}\n"
        features = [f for f in _as_list(info.get("feature")) if f and "asin" not in f.lower()]
        if features:
            doc += "- features: \n" + "".join(f"#{i + 1}: {f}\n" for i, f in enumerate(features))
        reviews = [r for r in _as_list(info.get("review")) if isinstance(r, dict)]
        if reviews:
            votes = [_vote(r.get("vote")) for r in reviews]
            order = sorted(range(len(reviews)), key=lambda i: -votes[i])[: self.max_entries + 2]
            doc += "- reviews: \n" + "".join(
                f"#{i + 1}:\nsummary: {reviews[i].get('summary', '')}\ntext: \"{reviews[i].get('reviewText', '')}\"\n"
                for i in order
            )
        qas = [q for q in _as_list(info.get("qa")) if isinstance(q, dict)][: self.max_entries + 2]
        if qas:
            doc += "- Q&A: \n" + "".join(
                f"#{i + 1}:\nquestion: \"{q.get('question', '')}\"\nanswer: \"{q.get('answer', '')}\"\n"
                for i, q in enumerate(qas)
            )
        return doc.rstrip("\n")


class StarkMagLayout(DocumentLayout):
    """STaRK MAG: paper title, abstract, date and venue; counts for authors, fields, institutions."""

    name = "stark-mag"

    def document(self, skb: SKB, node: int) -> str:
        t = skb.type_of(node)
        info = skb.fields[node]
        name = skb.names[node]
        if t == "paper":
            doc = f" - paper title: {name}\n"
            abstract = render_value(info.get("abstract")).replace("\r", "").rstrip("\n")
            doc += f" - abstract: {abstract}\n"
            if _known(info.get("Date")):
                doc += f" - publication date: {info['Date']}\n"
            for key, label in (
                ("OriginalVenue", "venue"),
                ("JournalDisplayName", "journal"),
                ("ConferenceSeriesDisplayName", "conference"),
                ("ConferenceInstancesDisplayName", "conference"),
            ):
                if _known(info.get(key)):
                    doc += f" - {label}: {info[key]}\n"
                    break
            return doc.rstrip("\n")
        label = {"author": "author name", "field_of_study": "field of study", "institution": "institution"}.get(t, t)
        doc = f" - {label}: {name}\n"
        prefix = {"author": "author", "field_of_study": "field", "institution": "institution"}.get(t, t)
        for key, what in (("PaperCount", "paper count"), ("CitationCount", "citation count")):
            if _known(info.get(key)):
                doc += f"- {prefix} {what}: {info[key]}\n"
        return doc.rstrip("\n")


class StarkPrimeLayout(DocumentLayout):
    """STaRK Prime: name, type, source and the ``details`` dictionary."""

    name = "stark-prime"
    gene_labels = {
        "name": "gene name",
        "type_of_gene": "gene types",
        "alias": "other gene names",
        "other_names": "extended other gene names",
        "genomic_pos": "genomic position",
        "generif": "PubMed text",
        "interpro": "protein family and classification information",
        "summary": "protein summary text",
    }

    def document(self, skb: SKB, node: int) -> str:
        info = skb.fields[node]
        t = skb.type_of(node)
        doc = f"- name: {skb.names[node]}\n- type: {t}\n- source: {render_value(info.get('source'))}\n"
        details = info.get("details")
        lines = []
        if isinstance(details, dict):
            for key, value in details.items():
                if str(value) in ("", "nan") or key.startswith("_") or "_id" in key:
                    continue
                if t == "gene/protein" and key in self.gene_labels:
                    value = self._gene_value(key, value)
                    lines.append(f"  - {key} ({self.gene_labels[key]}): {render_value(value)}")
                else:
                    lines.append(f"  - {key}: {render_value(value)}")
        if lines:
            doc += "- details:\n" + "\n".join(lines)
        return doc.rstrip("\n")

    @staticmethod
    def _gene_value(key: str, value: Any) -> Any:
        if key == "interpro":
            items = value if isinstance(value, list) else [value]
            return [v.get("desc", "") if isinstance(v, dict) else str(v) for v in items]
        if key == "generif" and isinstance(value, list):
            return "; ".join(v.get("text", "") if isinstance(v, dict) else str(v) for v in value)
        if key == "genomic_pos" and isinstance(value, list) and value:
            return value[0]
        return value


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return [value]


def _nested(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _vote(v: Any) -> int:
    try:
        return int(str(v).replace(",", ""))
    except (TypeError, ValueError):
        return 0


def _known(v: Any) -> bool:
    return v is not None and str(v) not in ("-1", "nan", "")


LAYOUTS: dict[str, type[DocumentLayout]] = {
    cls.name: cls for cls in (GenericLayout, StarkAmazonLayout, StarkMagLayout, StarkPrimeLayout)
}


def get_layout(name: str) -> DocumentLayout:
    """The layout called ``name`` (generic, stark-amazon, stark-mag, stark-prime)."""
    try:
        return LAYOUTS[name]()
    except KeyError:
        raise KeyError(f"unknown document layout {name!r}; known: {', '.join(LAYOUTS)}") from None


def layout_for(skb: SKB, override: str | None = None) -> DocumentLayout:
    return get_layout(override or skb.schema.document_layout)


# --- reranker serialization (paper Section 3.3, appendix 8.6) --------------------------------

TokenCounter = Callable[[str, int], str]


def truncate_words(text: str, max_tokens: int) -> str:
    """Keep the first ``max_tokens`` whitespace tokens (the default token budget)."""
    words = text.split()
    if len(words) <= max_tokens:
        return text
    return " ".join(words[:max_tokens]) + " ..."


def serialize_candidate(
    skb: SKB,
    node: int,
    layout: DocumentLayout | None = None,
    *,
    max_field_tokens: int = 300,
    max_neighbors_per_relation: int = 10,
    truncate: TokenCounter = truncate_words,
) -> str:
    """The candidate document the reranker reads, identical at training and inference:

        type: <node type>
        name: <name>
        <field>: <text, truncated to max_field_tokens>
        [RELATION NAME] <neighbour name>; <neighbour name>; ... (at most N per relation)

    Relations are undirected (both storage directions are unioned); neighbours are listed in
    ascending node-id order so the text is deterministic.
    """
    layout = layout or get_layout(skb.schema.document_layout)
    lines = [f"type: {skb.type_of(node)}", f"name: {truncate(skb.names[node], max_field_tokens)}"]
    for field, text in layout.text_fields(skb, node).items():
        lines.append(f"{_label(field)}: {truncate(' '.join(text.split()), max_field_tokens)}")
    for rel, ids in skb.neighbors_by_relation(node).items():
        shown = [skb.names[i] for i in ids[:max_neighbors_per_relation]]
        more = f" (+{len(ids) - len(shown)} more)" if len(ids) > len(shown) else ""
        lines.append(f"[{_label(rel).upper()}] " + "; ".join(shown) + more)
    return "\n".join(lines)


class CandidateSerializer:
    """The reranker's view of a node (:func:`serialize_candidate` with fixed settings), the one object
    that training, serving and the stored reranker vectors use; ``key`` names it in cache keys."""

    version = 1

    def __init__(self, skb: SKB, layout: DocumentLayout | None = None, *, max_field_tokens: int = 300,
                 max_neighbors: int = 10) -> None:
        self.skb = skb
        self.layout = layout or get_layout(skb.schema.document_layout)
        self.max_field_tokens, self.max_neighbors = max_field_tokens, max_neighbors

    @property
    def key(self) -> str:
        return f"candidate-v{self.version}/{self.layout.key}/f{self.max_field_tokens}/n{self.max_neighbors}"

    def __call__(self, node: int) -> str:
        return serialize_candidate(self.skb, int(node), self.layout, max_field_tokens=self.max_field_tokens,
                                   max_neighbors_per_relation=self.max_neighbors)


def name_text(skb: SKB, node: int) -> str:
    """The name-only text used by name-mode vector indexes."""
    return skb.names[node]


def document_json(skb: SKB, node: int) -> str:
    """The node as JSON (for display and debugging)."""
    return json.dumps(
        {"id": node, "type": skb.type_of(node), "name": skb.names[node], "fields": skb.fields[node]},
        ensure_ascii=False, default=str,
    )
