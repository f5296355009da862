"""The schema of a semi-structured knowledge base: node types, typed relations, candidate types."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class NodeTypeSpec(BaseModel):
    """One node type: which field is the name and which fields make up its document, in order."""

    model_config = ConfigDict(extra="allow")

    name_field: str = "name"
    text_fields: list[str] = Field(default_factory=list)


class RelationSpec(BaseModel):
    """A relation with the node types at its two ends, in the direction edges are stored."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    source: str
    target: str
    description: str = ""


class Schema(BaseModel):
    """What the graph contains.

    In memory a relation name may occur with several (source, target) pairs (STaRK Prime's
    ``parent-child`` links diseases, processes and more); the open format v1 requires one pair
    per name, which its reader checks and its writer arranges.
    """

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    description: str = ""
    node_types: dict[str, NodeTypeSpec]
    relations: list[RelationSpec]
    candidate_types: list[str] = Field(min_length=1)
    document_layout: str = "generic"

    @model_validator(mode="after")
    def _check_references(self) -> Schema:
        if not self.node_types:
            raise ValueError("node_types is empty")
        for i, rel in enumerate(self.relations):
            for end in ("source", "target"):
                t = getattr(rel, end)
                if t not in self.node_types:
                    raise ValueError(f"relations[{i}] ({rel.name}): {end} type {t!r} is not in node_types")
        for t in self.candidate_types:
            if t not in self.node_types:
                raise ValueError(f"candidate type {t!r} is not in node_types")
        return self

    @property
    def type_names(self) -> list[str]:
        """Node type names in schema order; a node's type id indexes this list."""
        return list(self.node_types)

    @property
    def relation_names(self) -> list[str]:
        """Distinct relation names, in schema order."""
        return list(dict.fromkeys(r.name for r in self.relations))

    def relation_ids(self, name: str) -> list[int]:
        """Indexes into :attr:`relations` of the entries called ``name``."""
        return [i for i, r in enumerate(self.relations) if r.name == name]

    def find_relation(self, name: str, source: str, target: str) -> int | None:
        """Index of relation ``name`` between the two types, in either direction (undirected)."""
        for i, r in enumerate(self.relations):
            if r.name == name and {r.source, r.target} == {source, target}:
                if r.source == source or r.source == target:
                    return i
        return None
