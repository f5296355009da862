"""The plan of Section 3.1: anchors, hops, target, risk level (and Amazon's retrieval mode)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RISK_LEVELS = ("no_trade", "weak", "normal", "aggressive")
RETRIEVAL_MODES = ("doc_search", "graph_filter_doc", "graph_expand", "graph_strict", "skip")

RiskLevel = Literal["no_trade", "weak", "normal", "aggressive"]
Direction = Literal["forward", "backward"]
DIRECTIONS = ("forward", "backward")


def reverse(direction: Direction | None) -> Direction | None:
    """The same edge seen from its other end."""
    return {"forward": "backward", "backward": "forward"}.get(direction) if direction else None  # type: ignore[return-value]
RetrievalMode = Literal["doc_search", "graph_filter_doc", "graph_expand", "graph_strict", "skip"]


class Anchor(BaseModel):
    """A text entity of the query, to be linked to nodes of type ``label``."""

    model_config = ConfigDict(extra="ignore")

    var: str = Field(min_length=1)
    text: str = Field(min_length=1)
    label: str
    match_mode: Literal["name", "doc"] = "name"


class Hop(BaseModel):
    """A walk over relation ``rel`` from variable ``from`` to ``to_var`` (of type ``to_label``). Relations are
    undirected unless ``dir`` says which way the stored edge runs: ``forward`` when ``from`` is the relation's
    source ("packages that T depends on" walks T -depends-> X forward from T), ``backward`` when ``to_var`` is.
    It matters only for relations whose two ends have the same type (depends, is_a, part_of, ...)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    from_var: str = Field(alias="from", min_length=1)
    rel: str
    to_var: str = Field(min_length=1)
    to_label: str
    direction: Direction | None = Field(None, alias="dir")

    def dump(self) -> dict:
        out = {"from": self.from_var, "rel": self.rel, "to_var": self.to_var, "to_label": self.to_label}
        if self.direction is not None:
            out["dir"] = self.direction
        return out


class Target(BaseModel):
    model_config = ConfigDict(extra="ignore")

    var: str = "T"
    labels: list[str] = Field(default_factory=list)
    relevance_text: str = ""


class Plan(BaseModel):
    model_config = ConfigDict(extra="ignore")

    anchors: list[Anchor] = Field(default_factory=list)
    hops: list[Hop] = Field(default_factory=list)
    target: Target = Field(default_factory=Target)
    risk_level: RiskLevel = "normal"
    retrieval_mode: RetrievalMode | None = None

    def dump(self) -> dict:
        out = {
            "anchors": [a.model_dump() for a in self.anchors],
            "hops": [h.dump() for h in self.hops],
            "target": self.target.model_dump(),
            "risk_level": self.risk_level,
        }
        if self.retrieval_mode is not None:
            out["retrieval_mode"] = self.retrieval_mode
        return out

    @property
    def is_empty(self) -> bool:
        return not self.anchors and not self.hops

    @classmethod
    def no_trade(cls, labels: list[str] | None = None) -> Plan:
        """The degraded plan: no graph evidence; Stage 2 falls back to the dense branch."""
        return cls(target=Target(labels=list(labels or [])), risk_level="no_trade")
