"""Reader for STaRK's processed knowledge bases (Amazon, MAG, Prime) and its QA files.

A processed directory holds ``node_info.pkl``, ``edge_index.pt``, ``edge_types.pt``,
``node_types.pt`` and, for Amazon and Prime, ``edge_type_dict.pkl`` / ``node_type_dict.pkl``
(MAG's type dictionaries are fixed in STaRK's code and are filled in here).

Security: ``.pkl`` files are Python pickles, and unpickling can run arbitrary code. This module
only opens pickles in a directory the user names explicitly (``--skb DIR``); never point it at
files you did not obtain from STaRK yourself. Tensors are read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import ast
import csv
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from grasp.errors import FormatError
from grasp.inputs import query_problem
from grasp.results import Query
from grasp.skb.graph import SKB
from grasp.skb.schema import NodeTypeSpec, RelationSpec, Schema
from grasp.storage import file_fingerprint, stable_hash

REQUIRED_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")


@dataclass(frozen=True)
class StarkDataset:
    """What STaRK's code knows about one dataset and its processed files do not always say."""

    name: str
    node_types: dict[int, str]
    edge_types: dict[int, str]
    name_keys: dict[str, str]
    text_fields: dict[str, list[str]]
    candidate_types: list[str]
    layout: str
    qa_folder: str
    hub_processed: str
    fallback_name_keys: tuple[str, ...] = field(default=("name", "title", "DisplayName"))


PRIME_TYPES = [
    "disease", "gene/protein", "molecular_function", "drug", "pathway",
    "anatomy", "effect/phenotype", "biological_process", "cellular_component", "exposure",
]
PRIME_RELATIONS = [
    "ppi", "carrier", "enzyme", "target", "transporter", "contraindication", "indication",
    "off-label use", "synergistic interaction", "associated with", "parent-child",
    "phenotype absent", "phenotype present", "side effect", "interacts with", "linked to",
    "expression present", "expression absent",
]

DATASETS: dict[str, StarkDataset] = {
    "amazon": StarkDataset(
        name="amazon",
        node_types={0: "product", 1: "brand", 2: "category", 3: "color"},
        edge_types={0: "also_buy", 1: "also_view", 2: "has_brand", 3: "has_category", 4: "has_color"},
        name_keys={"product": "title", "brand": "brand_name", "category": "category_name", "color": "color_name"},
        text_fields={
            "product": ["brand", "description", "feature", "review", "qa", "global_category", "category", "price", "rank", "details"],
            "brand": [], "category": [], "color": [],
        },
        candidate_types=["product"],
        layout="stark-amazon",
        qa_folder="amazon",
        hub_processed="skb/amazon/processed.zip",
    ),
    "mag": StarkDataset(
        name="mag",
        node_types={0: "author", 1: "institution", 2: "field_of_study", 3: "paper"},
        edge_types={
            0: "author___affiliated_with___institution", 1: "paper___cites___paper",
            2: "paper___has_topic___field_of_study", 3: "author___writes___paper",
        },
        name_keys={"paper": "title", "author": "DisplayName", "institution": "DisplayName", "field_of_study": "DisplayName"},
        text_fields={
            "paper": ["abstract", "Date", "OriginalVenue", "JournalDisplayName", "ConferenceSeriesDisplayName"],
            "author": ["PaperCount", "CitationCount"],
            "institution": ["PaperCount", "CitationCount"],
            "field_of_study": ["PaperCount", "CitationCount"],
        },
        candidate_types=["paper"],
        layout="stark-mag",
        qa_folder="mag",
        hub_processed="skb/mag/processed.zip",
    ),
    "prime": StarkDataset(
        name="prime",
        node_types=dict(enumerate(PRIME_TYPES)),
        edge_types=dict(enumerate(PRIME_RELATIONS)),
        name_keys={t: "name" for t in PRIME_TYPES},
        text_fields={t: ["source", "details"] for t in PRIME_TYPES},
        candidate_types=list(PRIME_TYPES),
        layout="stark-prime",
        qa_folder="primekg",
        hub_processed="skb/primekg/processed.zip",
    ),
}


DESCRIPTIONS = {
    "amazon": "Amazon products with brands, categories and colours; co-purchase and co-view links.",
    "mag": "Microsoft Academic Graph papers with authors, institutions, fields of study and citations.",
    "prime": "PrimeKG precision-medicine graph: diseases, genes/proteins, drugs, pathways, phenotypes, "
             "anatomy, GO terms and exposures.",
}


def is_stark_processed(path: Path) -> bool:
    return (Path(path) / "node_info.pkl").exists()


def _load_pickle(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # noqa: S301 - only from a directory the user named, see module docs
    except (pickle.UnpicklingError, EOFError, AttributeError, ModuleNotFoundError) as e:
        raise FormatError(f"cannot unpickle ({type(e).__name__}: {e})", file=path) from None


def _load_tensor(path: Path) -> np.ndarray:
    import torch

    try:
        t = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a bad file
        raise FormatError(f"cannot read tensor ({type(e).__name__}: {e})", file=path) from None
    return t.numpy() if hasattr(t, "numpy") else np.asarray(t)


def detect_dataset(type_names: list[str]) -> str:
    names = set(type_names)
    for key, ds in DATASETS.items():
        if names == set(ds.node_types.values()):
            return key
    raise FormatError(
        f"cannot tell which STaRK dataset has node types {sorted(names)}; pass the dataset name (amazon, mag, prime)"
    )


def read_stark_skb(directory: Path | str, dataset: str | None = None) -> SKB:
    """Load a STaRK processed directory (see the module docs about pickles)."""
    directory = Path(directory)
    for name in REQUIRED_FILES:
        if not (directory / name).exists():
            raise FormatError(f"{name} not found (a STaRK processed directory has {', '.join(REQUIRED_FILES)})", file=directory)
    node_info = _load_pickle(directory / "node_info.pkl")
    if not isinstance(node_info, dict):
        raise FormatError("expected a dict {node id: attributes}", file=directory / "node_info.pkl")
    edge_index = _load_tensor(directory / "edge_index.pt").astype(np.int64)
    edge_types = _load_tensor(directory / "edge_types.pt").astype(np.int64).reshape(-1)
    node_types = _load_tensor(directory / "node_types.pt").astype(np.int64).reshape(-1)
    node_dict = _load_pickle(directory / "node_type_dict.pkl") if (directory / "node_type_dict.pkl").exists() else None
    edge_dict = _load_pickle(directory / "edge_type_dict.pkl") if (directory / "edge_type_dict.pkl").exists() else None

    if dataset is None:
        dataset = detect_dataset(list(node_dict.values())) if node_dict else _guess_without_dict(node_info)
    if dataset not in DATASETS:
        raise FormatError(f"unknown STaRK dataset {dataset!r}; known: {', '.join(DATASETS)}")
    spec = DATASETS[dataset]
    node_dict = {int(k): v for k, v in (node_dict or spec.node_types).items()}
    edge_dict = {int(k): v for k, v in (edge_dict or spec.edge_types).items()}

    n = len(node_info)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise FormatError(f"expected shape (2, E), got {tuple(edge_index.shape)}", file=directory / "edge_index.pt")
    if edge_types.shape[0] != edge_index.shape[1]:
        raise FormatError("edge_types.pt and edge_index.pt disagree on the number of edges", file=directory / "edge_types.pt")
    if node_types.shape[0] != n or set(node_info) != set(range(n)):
        raise FormatError(f"node_info.pkl has {n} nodes, node_types.pt {node_types.shape[0]}; ids must be 0..N-1",
                          file=directory / "node_types.pt")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        raise FormatError(f"edge to a missing node (nodes are 0..{n - 1})", file=directory / "edge_index.pt")
    unknown = set(np.unique(edge_types).tolist()) - set(edge_dict)
    if unknown:
        raise FormatError(f"edge type ids {sorted(unknown)} are not in the edge type dictionary", file=directory / "edge_types.pt")

    type_names = [node_dict[k] for k in sorted(node_dict)]
    type_remap = np.zeros(max(node_dict) + 1, dtype=np.int16)
    for new, old in enumerate(sorted(node_dict)):
        type_remap[old] = new
    ntype = type_remap[node_types]

    names, fields = [], []
    for i in range(n):
        info = node_info[i]  # edited in place: the unpickled dicts are ours, and copying each would double them
        if not isinstance(info, dict):
            raise FormatError(f"node {i}: expected a dict of attributes, got {type(info).__name__}",
                              file=directory / "node_info.pkl")
        t = type_names[ntype[i]]
        key = spec.name_keys.get(t, "name")
        raw_name = info.pop(key, None)
        if raw_name is None:
            raw_name = next((info.get(k) for k in spec.fallback_name_keys if info.get(k) not in (None, -1, "-1")), None)
        name = str(raw_name).strip() if raw_name not in (None, -1, "-1") else ""
        names.append(name or f"{t} {i}")
        info.pop("type", None)
        if "id" in info:
            info["source_id"] = info.pop("id")
        fields.append(info)

    src, dst = edge_index[0], edge_index[1]
    relations, rel_of_edge, src, dst = _orient_relations(src, dst, edge_types, ntype, type_names, edge_dict)
    schema = Schema(
        name=f"stark-{dataset}",
        description=DESCRIPTIONS[dataset],  # not the folder: the prompt, and so each plan's cache key, holds it
        node_types={
            t: NodeTypeSpec(name_field="name", text_fields=spec.text_fields.get(t, [])) for t in type_names
        },
        relations=relations,
        candidate_types=spec.candidate_types,
        document_layout=spec.layout,
    )
    fingerprint = stable_hash([file_fingerprint(directory / f) for f in REQUIRED_FILES])
    return SKB(schema, ntype, names, fields, src.astype(np.int32), rel_of_edge.astype(np.int16), dst.astype(np.int32),
               source=str(directory.resolve()), fingerprint=fingerprint, meta={"stark_dataset": dataset})


def _guess_without_dict(node_info: dict) -> str:
    sample = node_info.get(0, {})
    if "DisplayName" in sample or "abstract" in sample or "PaperCount" in sample:
        return "mag"
    raise FormatError("node_type_dict.pkl is missing and the dataset is not MAG; pass the dataset name")


def _orient_relations(src, dst, etype, ntype, type_names, edge_dict):
    """One schema relation per (relation, unordered type pair); edges turned to the relation's
    direction, and an edge stored in both directions kept once (STaRK stores many twice)."""
    ts, td = ntype[src].astype(np.int64), ntype[dst].astype(np.int64)
    lo, hi = np.minimum(ts, td), np.maximum(ts, td)
    n_types = len(type_names)
    pair_key = (etype * n_types + lo) * n_types + hi
    keys, first, inverse = np.unique(pair_key, return_index=True, return_inverse=True)
    relations = []
    for k, f in zip(keys.tolist(), first.tolist(), strict=True):
        e = k // (n_types * n_types)
        relations.append(RelationSpec(name=str(edge_dict[e]), source=type_names[ts[f]], target=type_names[td[f]]))
    want_src = np.array([type_names.index(r.source) for r in relations])[inverse]
    flip = ts != want_src
    src, dst = np.where(flip, dst, src), np.where(flip, src, dst)
    rel = inverse.astype(np.int64)
    n = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    # one edge per (relation, unordered pair): exact duplicates and the second direction go, and where both
    # directions are stored the one running from the lower id stays (a sort: np.isin took 24 s on 8M Prime edges)
    pair = (rel * n + np.minimum(src, dst)) * n + np.maximum(src, dst)
    order = np.lexsort((src > dst, pair))
    first = np.ones(order.size, dtype=bool)
    first[1:] = pair[order[1:]] != pair[order[:-1]]
    mask = np.zeros(src.shape[0], dtype=bool)
    mask[order[first]] = True
    return relations, rel[mask], src[mask], dst[mask]


# --- QA files -------------------------------------------------------------------------------

def read_stark_qa(
    root: Path | str,
    *,
    human_generated: bool = False,
    id_scheme: str = "old",
) -> list[Query]:
    """Read one dataset's STaRK QA folder (``stark_qa/stark_qa.csv`` + ``split/*.index``).

    ``root`` is the dataset folder, e.g. ``stark_qa/amazon``. Splits come from the index files;
    the human-generated set gets split ``human_generated_eval``. For Amazon, ``id_scheme='hf'``
    renumbers queries as the Hugging Face Hub's current files do (``derived/amazon_oldid_to_hfid.csv``).
    """
    root = Path(root)
    csv_path = root / "stark_qa" / ("stark_qa_human_generated_eval.csv" if human_generated else "stark_qa.csv")
    if not csv_path.exists():
        raise FormatError("STaRK QA file not found", file=csv_path)
    split_of: dict[str, str] = {}
    if not human_generated:
        for split in ("train", "val", "test"):
            idx = root / "split" / f"{split}.index"
            if idx.exists():
                for qid in idx.read_text().split():
                    split_of[qid] = split
    id_map: dict[str, str] | None = None
    if id_scheme == "hf":
        map_path = root / "derived" / "amazon_oldid_to_hfid.csv"
        if not map_path.exists():
            raise FormatError("id_scheme 'hf' needs the old->hf id map", file=map_path)
        with open(map_path, newline="") as f:
            id_map = {row["old_id"]: row["hf_id"] for row in csv.DictReader(f)}
    elif id_scheme != "old":
        raise FormatError(f"unknown id scheme {id_scheme!r} (old or hf)")

    queries = []
    with open(csv_path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for lineno, row in enumerate(reader, 2):
            qid = (row.get("id") or "").strip()
            if not qid:
                raise FormatError("missing query id", file=csv_path, line=lineno, field="id")
            try:
                answers = ast.literal_eval(row.get("answer_ids") or "")
            except (ValueError, SyntaxError):
                raise FormatError("not a Python list of ids", file=csv_path, line=lineno, field="answer_ids") from None
            if not isinstance(answers, (list, tuple)) or not all(isinstance(a, int) for a in answers):
                raise FormatError("not a list of integer ids", file=csv_path, line=lineno, field="answer_ids")
            split = "human_generated_eval" if human_generated else split_of.get(qid)
            out_id = id_map.get(qid, qid) if id_map is not None else qid
            if (problem := query_problem(row.get("query"))) is not None:
                raise FormatError(problem, file=csv_path, line=lineno, field="query")
            queries.append(Query(out_id, row["query"], list(answers), split, None))
    return queries


# --- schemas without the graphs (for planning from STaRK's query text alone) ------------------

_PRIME_PAIRS = {
    "ppi": [("gene/protein", "gene/protein")],
    "carrier": [("drug", "gene/protein")], "enzyme": [("drug", "gene/protein")],
    "target": [("drug", "gene/protein")], "transporter": [("drug", "gene/protein")],
    "contraindication": [("drug", "disease")], "indication": [("drug", "disease")], "off-label use": [("drug", "disease")],
    "synergistic interaction": [("drug", "drug")],
    "associated with": [("gene/protein", "disease"), ("effect/phenotype", "gene/protein")],
    "parent-child": [(t, t) for t in ("disease", "effect/phenotype", "biological_process", "molecular_function",
                                      "cellular_component", "pathway", "anatomy", "exposure")],
    "phenotype absent": [("disease", "effect/phenotype")], "phenotype present": [("disease", "effect/phenotype")],
    "side effect": [("drug", "effect/phenotype")],
    "interacts with": [("gene/protein", t) for t in ("biological_process", "molecular_function", "cellular_component", "pathway")]
    + [("exposure", t) for t in ("gene/protein", "biological_process", "molecular_function", "cellular_component")],
    "linked to": [("exposure", "disease")],
    "expression present": [("anatomy", "gene/protein")], "expression absent": [("anatomy", "gene/protein")],
}
_AMAZON_PAIRS = {"also_buy": [("product", "product")], "also_view": [("product", "product")],
                 "has_brand": [("product", "brand")], "has_category": [("product", "category")],
                 "has_color": [("product", "color")]}


def stark_schema(dataset: str) -> Schema:
    """STaRK's schema (node types, relations with their end types) without loading the graph."""
    spec = DATASETS[dataset]
    if dataset == "prime":
        pairs = _PRIME_PAIRS
    elif dataset == "amazon":
        pairs = _AMAZON_PAIRS
    else:  # MAG names carry their end types: source___relation___target
        pairs = {name: [(name.split("___")[0], name.split("___")[2])] for name in spec.edge_types.values()}
    relations = [RelationSpec(name=name, source=s, target=t) for name, ps in pairs.items() for s, t in ps]
    return Schema(
        name=f"stark-{dataset}",
        description=DESCRIPTIONS[dataset],
        node_types={t: NodeTypeSpec(text_fields=spec.text_fields.get(t, [])) for t in spec.node_types.values()},
        relations=relations,
        candidate_types=spec.candidate_types,
        document_layout=spec.layout,
    )
