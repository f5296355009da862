"""Reader and writer for the open SKB format, version 1 (``docs/skb-format.md``).

    schema.json, nodes.jsonl[.gz], edges.tsv[.gz], qa/queries.jsonl (optional)

Every problem is reported as a :class:`~grasp.errors.FormatError` naming file, line and field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from grasp.errors import FormatError, first_error
from grasp.skb.graph import SKB
from grasp.skb.schema import RelationSpec, Schema
from grasp.skb.textio import find_data_file, iter_json_objects, iter_lines, open_text
from grasp.storage import atomic_dir, file_fingerprint, stable_hash

FORMAT_VERSION = 1


def is_open_format(path: Path) -> bool:
    return (Path(path) / "schema.json").exists()


def read_schema(path: Path) -> Schema:
    """Parse and check schema.json, including the v1 rules (name_field, one pair per relation)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FormatError("schema.json not found", file=path) from None
    except json.JSONDecodeError as e:
        raise FormatError(f"malformed JSON ({e.msg})", file=path, line=e.lineno) from None
    except UnicodeDecodeError:
        raise FormatError("not UTF-8 text; save the file as UTF-8", file=path) from None
    try:
        schema = Schema.model_validate(raw)
    except ValidationError as e:
        loc, msg = first_error(e)
        raise FormatError(msg, file=path, field=loc or None) from None
    for t, spec in schema.node_types.items():
        if spec.name_field != "name":
            raise FormatError("must be 'name' in format version 1", file=path, field=f"node_types.{t}.name_field")
    seen: dict[str, int] = {}
    for i, rel in enumerate(schema.relations):
        if rel.name in seen:
            raise FormatError(
                f"relation {rel.name!r} is declared twice (relations[{seen[rel.name]}]); "
                "a relation name has exactly one (source, target) pair",
                file=path,
                field=f"relations[{i}].name",
            )
        seen[rel.name] = i
    return schema


def _check_field_values(fields: Any, path: Path, lineno: int) -> dict[str, Any]:
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise FormatError("must be a JSON object", file=path, line=lineno, field="fields")
    for key, value in fields.items():
        ok = isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        if not ok:
            raise FormatError("values must be strings or lists of strings", file=path, line=lineno, field=f"fields.{key}")
        if not all(_encodable(v) for v in ([value] if isinstance(value, str) else value)):
            raise FormatError(_SURROGATE, file=path, line=lineno, field=f"fields.{key}")
    return fields


_SURROGATE = "holds a lone surrogate (a \\ud800-\\udfff escape without its pair), which is no character"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read_nodes(path: Path, schema: Schema) -> tuple[np.ndarray, list[str], list[dict[str, Any]]]:
    type_index = {t: i for i, t in enumerate(schema.type_names)}
    rows: dict[int, tuple[int, str, dict[str, Any]]] = {}
    first_line: dict[int, int] = {}
    for lineno, rec in iter_json_objects(path):
        nid = rec.get("id")
        if not isinstance(nid, int) or isinstance(nid, bool) or nid < 0:
            raise FormatError("must be a non-negative integer", file=path, line=lineno, field="id")
        if nid in first_line:
            raise FormatError(f"duplicate node id {nid} (first on line {first_line[nid]})", file=path, line=lineno, field="id")
        first_line[nid] = lineno
        ntype = rec.get("type")
        if not isinstance(ntype, str) or ntype not in type_index:
            raise FormatError(
                f"unknown node type {ntype!r} (schema has: {', '.join(schema.type_names)})",
                file=path, line=lineno, field="type",
            )
        name = rec.get("name")
        if not isinstance(name, str) or not name.strip():
            raise FormatError("missing or empty name", file=path, line=lineno, field="name")
        if not _encodable(name):
            raise FormatError(_SURROGATE, file=path, line=lineno, field="name")
        rows[nid] = (type_index[ntype], name, _check_field_values(rec.get("fields"), path, lineno))
    n = len(rows)
    if n == 0:
        raise FormatError("no nodes", file=path)
    if max(rows) != n - 1:
        missing = next(i for i in range(n) if i not in rows)
        raise FormatError(
            f"node ids must be dense 0..N-1: {n} nodes but id {missing} is missing (largest id {max(rows)})",
            file=path, field="id",
        )
    node_type = np.fromiter((rows[i][0] for i in range(n)), dtype=np.int16, count=n)
    names = [rows[i][1] for i in range(n)]
    fields = [rows[i][2] for i in range(n)]
    return node_type, names, fields


def _read_edges(path: Path, schema: Schema, node_type: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rel_index = {r.name: i for i, r in enumerate(schema.relations)}
    n = node_type.shape[0]
    src: list[int] = []
    rel: list[int] = []
    dst: list[int] = []
    for lineno, line in iter_lines(path):
        if lineno == 1:
            if line.rstrip("\r\n").split("\t") != ["source", "relation", "target"]:
                raise FormatError("first line must be the header 'source<TAB>relation<TAB>target'", file=path, line=1)
            continue
        line = line.rstrip("\r\n")
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise FormatError(f"expected 3 tab-separated columns, got {len(parts)}", file=path, line=lineno)
        s, r, d = parts
        try:
            si, di = int(s), int(d)
        except ValueError:
            bad = "source" if not s.strip().lstrip("-").isdigit() else "target"
            raise FormatError("node id must be an integer", file=path, line=lineno, field=bad) from None
        ri = rel_index.get(r)
        if ri is None:
            raise FormatError(f"unknown relation {r!r}", file=path, line=lineno, field="relation")
        for end, value in (("source", si), ("target", di)):
            if not 0 <= value < n:
                raise FormatError(f"edge to a missing node {value} (nodes are 0..{n - 1})", file=path, line=lineno, field=end)
        src.append(si)
        rel.append(ri)
        dst.append(di)
    src_a = np.asarray(src, dtype=np.int32)
    rel_a = np.asarray(rel, dtype=np.int16)
    dst_a = np.asarray(dst, dtype=np.int32)
    # end types must match the schema (vectorised, then report the first offending line)
    type_ids = {t: i for i, t in enumerate(schema.type_names)}
    want_src = np.array([type_ids[r.source] for r in schema.relations], dtype=np.int16)
    want_dst = np.array([type_ids[r.target] for r in schema.relations], dtype=np.int16)
    if src_a.size:
        bad = (node_type[src_a] != want_src[rel_a]) | (node_type[dst_a] != want_dst[rel_a])
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            r = schema.relations[rel_a[i]]
            got = (schema.type_names[node_type[src_a[i]]], schema.type_names[node_type[dst_a[i]]])
            raise FormatError(
                f"relation {r.name!r} links {r.source} -> {r.target}, but this edge links {got[0]} -> {got[1]}",
                file=path, line=_data_line(path, i), field="relation",
            )
    return src_a, rel_a, dst_a


def _data_line(path: Path, edge_index: int) -> int:
    """Line number of the ``edge_index``-th non-empty data line (only computed on error)."""
    seen = -1
    for lineno, line in iter_lines(path):
        if lineno > 1 and line.strip():
            seen += 1
            if seen == edge_index:
                return lineno
    return -1


def read_skb(directory: Path | str) -> SKB:
    """Load an open-format SKB directory, validating it completely."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FormatError("not a directory", file=directory)
    schema = read_schema(directory / "schema.json")
    nodes_path = find_data_file(directory, "nodes.jsonl")
    edges_path = find_data_file(directory, "edges.tsv")
    if nodes_path is None:
        raise FormatError("nodes.jsonl(.gz) not found", file=directory)
    if edges_path is None:
        raise FormatError("edges.tsv(.gz) not found", file=directory)
    node_type, names, fields = _read_nodes(nodes_path, schema)
    src, rel, dst = _read_edges(edges_path, schema, node_type)
    fingerprint = stable_hash(
        [file_fingerprint(p) for p in (directory / "schema.json", nodes_path, edges_path)]
    )
    return SKB(schema, node_type, names, fields, src, rel, dst, source=str(directory.resolve()), fingerprint=fingerprint)


# --- writer --------------------------------------------------------------------------------

def _v1_relations(schema: Schema) -> list[RelationSpec]:
    """Relation entries with unique names: a name used with several type pairs becomes
    ``name__source__target`` for each pair (v1 allows one pair per name)."""
    counts: dict[str, int] = {}
    for r in schema.relations:
        counts[r.name] = counts.get(r.name, 0) + 1
    out = []
    for r in schema.relations:
        name = r.name if counts[r.name] == 1 else f"{r.name}__{r.source}__{r.target}"
        out.append(r.model_copy(update={"name": name}))
    return out


def _plain_value(value: Any) -> str | list[str]:
    """A field value as the open format holds it (a string or a list of strings): nested values (STaRK's
    details dictionaries, review and Q&A lists) as the readable text documents show (``key: value; ...``)."""
    from grasp.skb.documents import render_value

    if isinstance(value, list):
        return [render_value(v) for v in value]
    return render_value(value)


def write_skb(skb: SKB, directory: Path | str, *, compress: bool = True, queries: list | None = None) -> Path:
    """Write ``skb`` (and optionally its queries) in the open format, atomically.

    Field values that are not strings or lists of strings (STaRK's nested values) are written as the
    text documents show. The written schema uses the generic document layout; an SKB read with another
    layout (STaRK's) is renamed ``<name>-converted``, so that nothing treats the copy as STaRK's own files.
    """
    from grasp.skb.queries import write_queries

    directory = Path(directory)
    relations = _v1_relations(skb.schema)
    update: dict[str, Any] = {"relations": relations}
    if skb.schema.document_layout != "generic":  # e.g. STaRK's: the copy is no longer STaRK's processed data
        update.update(name=f"{skb.schema.name}-converted", description=(
            f"{skb.schema.description or skb.schema.name} Converted to the open format: the generic document layout, "
            "nested values as text."))
    schema = skb.schema.model_copy(update=update)
    schema_dict = schema.model_dump(mode="json")
    schema_dict["document_layout"] = "generic"
    suffix = ".gz" if compress else ""
    type_names = skb.schema.type_names
    with atomic_dir(directory) as tmp:
        (tmp / "schema.json").write_text(json.dumps(schema_dict, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        with open_text(tmp / f"nodes.jsonl{suffix}", "w") as f:
            for i in range(skb.num_nodes):
                fields = {k: _plain_value(v) for k, v in skb.fields[i].items() if v is not None}
                rec = {"id": i, "type": type_names[skb.node_type[i]], "name": skb.names[i], "fields": fields}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        with open_text(tmp / f"edges.tsv{suffix}", "w") as f:
            f.write("source\trelation\ttarget\n")
            for s, r, d in zip(skb.edge_src.tolist(), skb.edge_rel.tolist(), skb.edge_dst.tolist(), strict=True):
                f.write(f"{s}\t{relations[r].name}\t{d}\n")
        if queries is not None:
            (tmp / "qa").mkdir()
            write_queries(queries, tmp / "qa" / "queries.jsonl")
    return directory
