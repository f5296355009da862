"""STaRK's processed format and QA files, on small fixtures written in exactly those formats."""

from __future__ import annotations

import csv
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from grasp.errors import FormatError
from grasp.skb import load_skb, read_skb, read_stark_qa, read_stark_skb, write_skb
from grasp.skb.documents import get_layout


def _save_processed(d: Path, node_info, edge_index, edge_types, node_types, node_type_dict=None, edge_type_dict=None):
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "node_info.pkl", "wb") as f:
        pickle.dump(node_info, f)
    torch.save(torch.LongTensor(edge_index), d / "edge_index.pt")
    torch.save(torch.LongTensor(edge_types), d / "edge_types.pt")
    torch.save(torch.LongTensor(node_types), d / "node_types.pt")
    if node_type_dict is not None:
        with open(d / "node_type_dict.pkl", "wb") as f:
            pickle.dump(node_type_dict, f)
    if edge_type_dict is not None:
        with open(d / "edge_type_dict.pkl", "wb") as f:
            pickle.dump(edge_type_dict, f)
    return d


PRIME_TYPES = {0: "disease", 1: "gene/protein", 7: "biological_process", 2: "molecular_function", 3: "drug", 4: "pathway",
               5: "anatomy", 6: "effect/phenotype", 8: "cellular_component", 9: "exposure"}
PRIME_RELS = {9: "associated with", 10: "parent-child", 0: "ppi"}


@pytest.fixture
def prime_dir(tmp_path):
    node_info = {
        0: {"id": "MONDO:1", "type": "disease", "name": "Ehlers-Danlos syndrome", "source": "MONDO",
            "details": {"mondo_definition": "A connective tissue disorder.", "umls_id": "C1"}},
        1: {"id": "B3", "type": "gene/protein", "name": "B3GALT6", "source": "NCBI",
            "details": {"summary": "galactosyltransferase", "alias": ["EDSSPD2"], "genomic_pos": [{"chr": "1"}],
                        "interpro": {"desc": "Glycosyl transferase"}, "generif": [{"text": "linked to EDS"}]}},
        2: {"id": "MONDO:2", "type": "disease", "name": "connective tissue disease", "source": "MONDO"},
        3: {"id": "GO:1", "type": "biological_process", "name": "glycosylation", "source": "GO"},
        4: {"id": "GO:2", "type": "biological_process", "name": "protein glycosylation", "source": "GO"},
        5: {"id": "X", "type": "gene/protein", "name": "XYLT1", "source": "NCBI"},
    }
    node_types = [0, 1, 0, 7, 7, 1]
    # STaRK stores edges in both directions; parent-child spans two type pairs
    pairs = [(1, 9, 0), (0, 9, 1), (0, 10, 2), (2, 10, 0), (4, 10, 3), (3, 10, 4), (1, 0, 5), (5, 0, 1)]
    edge_index = [[s for s, _, _ in pairs], [d for _, _, d in pairs]]
    edge_types = [r for _, r, _ in pairs]
    return _save_processed(tmp_path / "prime" / "processed", node_info, edge_index, edge_types, node_types,
                           PRIME_TYPES, PRIME_RELS)


def test_prime_reads_schema_and_dedupes_directions(prime_dir):
    skb = read_stark_skb(prime_dir)
    assert skb.meta["stark_dataset"] == "prime"
    assert skb.names[1] == "B3GALT6"
    assert skb.type_of(1) == "gene/protein"
    assert skb.num_edges == 4  # each undirected pair once
    pc = [r for r in skb.schema.relations if r.name == "parent-child"]
    assert {(r.source, r.target) for r in pc} == {("disease", "disease"), ("biological_process", "biological_process")}
    assert skb.neighbors(0, "associated with").tolist() == [1]
    assert skb.neighbors(1, "associated with").tolist() == [0]
    assert skb.fields[1]["source_id"] == "B3"
    assert set(skb.schema.candidate_types) == set(PRIME_TYPES.values())


def test_prime_layout_matches_stark(prime_dir):
    skb = read_stark_skb(prime_dir)
    doc = get_layout("stark-prime").document(skb, 1)
    assert doc.startswith("- name: B3GALT6\n- type: gene/protein\n- source: NCBI\n- details:\n")
    assert "  - summary (protein summary text): galactosyltransferase" in doc
    assert "  - interpro (protein family and classification information): Glycosyl transferase" in doc
    assert "  - generif (PubMed text): linked to EDS" in doc
    disease = get_layout("stark-prime").document(skb, 0)
    assert "mondo_definition: A connective tissue disorder." in disease
    assert "umls_id" not in disease  # STaRK skips keys containing '_id'


def test_convert_to_open_format_and_back(prime_dir, tmp_path):
    skb = read_stark_skb(prime_dir)
    out = write_skb(skb, tmp_path / "open")
    again = read_skb(out)
    names = {r.name for r in again.schema.relations}
    assert "parent-child__disease__disease" in names and "associated with" in names
    assert again.num_edges == skb.num_edges
    assert again.names == skb.names
    # nested values become the text documents show, and the copy no longer calls itself STaRK's
    assert again.fields[1]["details"].startswith("summary: galactosyltransferase; alias: EDSSPD2; genomic_pos: chr: 1")
    assert again.schema.name == "stark-prime-converted" and again.schema.document_layout == "generic"
    assert "galactosyltransferase" in get_layout("generic").document(again, 1)


def test_mag_without_type_dicts(tmp_path):
    node_info = {
        0: {"DisplayName": "Ada Lovelace", "PaperCount": 3, "CitationCount": -1},
        1: {"DisplayName": "University of London", "PaperCount": 10, "CitationCount": 5},
        2: {"DisplayName": "analytical engines", "PaperCount": -1, "CitationCount": -1},
        3: {"title": "Notes on the engine", "abstract": "We describe\r\n an engine.\n", "Date": "1843-01-01",
            "OriginalVenue": "Taylor's Memoirs", "JournalDisplayName": -1},
        4: {"title": "A reply", "abstract": "Comments.", "Date": -1, "OriginalVenue": -1, "JournalDisplayName": "Journal X"},
    }
    edge_index = [[0, 0, 4, 3, 0], [1, 3, 3, 2, 4]]
    edge_types = [0, 3, 1, 2, 3]
    d = _save_processed(tmp_path / "mag", node_info, edge_index, edge_types, [0, 1, 2, 3, 3])
    skb = load_skb(d)
    assert skb.meta["stark_dataset"] == "mag"
    assert skb.candidate_ids.tolist() == [3, 4]
    layout = get_layout("stark-mag")
    assert layout.document(skb, 3) == (" - paper title: Notes on the engine\n - abstract: We describe\n an engine.\n"
                                       " - publication date: 1843-01-01\n - venue: Taylor's Memoirs")
    assert " - journal: Journal X" in layout.document(skb, 4)
    assert layout.document(skb, 0) == " - author name: Ada Lovelace\n- author paper count: 3"
    assert skb.neighbors(3, "paper___cites___paper").tolist() == [4]


def test_amazon_layout(tmp_path):
    node_info = {
        0: {"title": "Trike", "brand": "Radio Flyer", "description": ["A push trike.", ""],
            "feature": ["steel frame", "ASIN B00"], "details": {"dictionary": {"product_dimensions": "10 x 5 ; 3 pounds"}},
            "review": [{"summary": "ok", "reviewText": "fine", "vote": None}, {"summary": "great", "reviewText": "kids love it", "vote": "1,204"}],
            "qa": [{"question": "safe?", "answer": "yes"}]},
        1: {"brand_name": "Radio Flyer"},
    }
    d = _save_processed(tmp_path / "amazon", node_info, [[0], [1]], [2], [0, 1],
                        {0: "product", 1: "brand", 2: "category", 3: "color"},
                        {0: "also_buy", 1: "also_view", 2: "has_brand", 3: "has_category", 4: "has_color"})
    skb = read_stark_skb(d)
    doc = get_layout("stark-amazon").document(skb, 0)
    assert doc.startswith("- product: Trike\n- brand: Radio Flyer\n- dimensions: 10 x 5\n- weight: 3 pounds\n- description: A push trike.")
    assert "#1: steel frame" in doc and "ASIN" not in doc
    assert doc.index("kids love it") < doc.index("fine")  # most-voted review first
    assert 'question: "safe?"' in doc
    assert get_layout("stark-amazon").document(skb, 1) == "brand name: Radio Flyer"


def test_bad_stark_directories(tmp_path, prime_dir):
    (prime_dir / "edge_types.pt").write_bytes(b"not a tensor")
    with pytest.raises(FormatError, match="edge_types.pt: cannot read tensor"):
        read_stark_skb(prime_dir)
    d = tmp_path / "partial"
    d.mkdir()
    (d / "node_info.pkl").write_bytes(pickle.dumps({0: {}}))
    with pytest.raises(FormatError, match="edge_index.pt not found"):
        read_stark_skb(d)


def _write_qa(root: Path, rows, splits, human_rows=None, id_map=None):
    (root / "stark_qa").mkdir(parents=True)
    (root / "split").mkdir()
    with open(root / "stark_qa" / "stark_qa.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "query", "answer_ids"])
        w.writerows(rows)
    for split, ids in splits.items():
        (root / "split" / f"{split}.index").write_text("\n".join(map(str, ids)) + "\n")
    if human_rows:
        with open(root / "stark_qa" / "stark_qa_human_generated_eval.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "query", "answer_ids", "answer_ids_source"])
            w.writerows(human_rows)
    if id_map:
        (root / "derived").mkdir()
        with open(root / "derived" / "amazon_oldid_to_hfid.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["old_id", "hf_id"])
            w.writerows(id_map.items())
    return root


def test_stark_qa_splits_human_and_hf_ids(tmp_path):
    root = _write_qa(tmp_path / "amazon", [[601168, "yoga pants?", "[601168, 947318]"], [98546, "shooting sticks", "[98546]"]],
                     {"train": [98546], "test": [601168]},
                     human_rows=[[0, "card box", "[5, 6]", "[5]"]], id_map={98546: 0, 601168: 1})
    qs = read_stark_qa(root)
    assert [(q.qid, q.split, q.answer_ids) for q in qs] == [("601168", "test", [601168, 947318]), ("98546", "train", [98546])]
    assert [q.qid for q in read_stark_qa(root, id_scheme="hf")] == ["1", "0"]
    human = read_stark_qa(root, human_generated=True)
    assert human[0].split == "human_generated_eval" and human[0].answer_ids == [5, 6]


def test_stark_qa_bad_answer_list(tmp_path):
    root = _write_qa(tmp_path / "mag", [[1, "q", "[1, 2"]], {"test": [1]})
    with pytest.raises(FormatError, match=r"stark_qa.csv:2: field 'answer_ids'"):
        read_stark_qa(root)


def test_cli_convert(tmp_path, prime_dir):
    from grasp.cli import main

    qa = _write_qa(tmp_path / "qa", [[7, "what disease is linked to B3GALT6?", "[0]"]], {"test": [7]})
    main(["data", "convert", str(prime_dir), str(tmp_path / "out"), "--qa", str(qa)])
    skb = read_skb(tmp_path / "out")
    assert skb.num_nodes == 6
    assert (tmp_path / "out" / "qa" / "queries.jsonl").read_text().count("\n") == 1
    assert np.all(skb.node_type >= 0)


def test_each_undirected_pair_is_kept_once_in_its_stored_direction():
    """On random edge lists: every (relation, unordered pair) stored once or more is kept exactly once; where
    both directions are stored the lower id is the source, otherwise the stored direction stays."""
    from grasp.skb.stark import _orient_relations

    rng = np.random.default_rng(0)
    for _ in range(100):
        m, k = int(rng.integers(1, 60)), int(rng.integers(2, 12))
        src, dst, et = rng.integers(0, k, m), rng.integers(0, k, m), rng.integers(0, 2, m)
        relations, rel, s, d = _orient_relations(src, dst, et, np.zeros(k, dtype=np.int64), ["t"], {0: "a", 1: "b"})
        etype = [{"a": 0, "b": 1}[r.name] for r in relations]
        stored = {(int(r), int(a), int(b)) for r, a, b in zip(et, src, dst, strict=True)}
        kept = [(etype[r], a, b) for r, a, b in zip(rel.tolist(), s.tolist(), d.tolist(), strict=True)]
        assert len(kept) == len({(r, min(a, b), max(a, b)) for r, a, b in stored})
        for r, a, b in kept:
            assert (r, a, b) in stored and (a <= b or (r, b, a) not in stored)
