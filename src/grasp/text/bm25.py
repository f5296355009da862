"""BM25 over the full documents of candidate nodes (``bm25s``; Lucene's variant by default)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grasp.config import BM25Config
from grasp.errors import IndexCorruptError
from grasp.progress import announce
from grasp.results import Query, Ranking, Run
from grasp.retriever import Retriever
from grasp.skb.documents import DocumentLayout
from grasp.skb.graph import SKB
from grasp.storage import atomic_dir, checksum, stable_hash


def make_tokenizer(config: BM25Config):
    import bm25s

    stemmer = None
    if config.stemmer:
        import Stemmer

        stemmer = Stemmer.Stemmer(config.stemmer)
    return bm25s.tokenization.Tokenizer(stopwords=config.stopwords or [], stemmer=stemmer)


class BM25Retriever(Retriever):
    """Sparse lexical baseline. The index is saved under ``root`` and reused while the SKB,
    layout and BM25 settings are unchanged."""

    name = "bm25"

    def __init__(self, skb: SKB, layout: DocumentLayout, root: Path, config: BM25Config | None = None,
                 *, progress: bool = True, node_ids: np.ndarray | None = None) -> None:
        import bm25s

        self.skb = skb
        self.config = config or BM25Config()
        self.node_ids = skb.candidate_ids if node_ids is None else np.asarray(node_ids, dtype=np.int64)
        key = {"skb": skb.fingerprint, "layout": layout.key, "bm25": self.config.model_dump(),
               "nodes": stable_hash(self.node_ids.tolist()), "format": 1}
        self.index_dir = Path(root) / f"bm25-{stable_hash(key)}"
        self.tokenizer = make_tokenizer(self.config)
        if not (self.index_dir / "complete.json").exists():
            self._build(layout, key, progress)
        try:
            self.model = bm25s.BM25.load(str(self.index_dir / "model"), mmap=False)
            self.tokenizer.load_vocab(str(self.index_dir))
            self.tokenizer.load_stopwords(str(self.index_dir))
            stored = np.load(self.index_dir / "node_ids.npy")
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
            raise IndexCorruptError(f"{self.index_dir}: broken BM25 index ({e}); delete the folder to rebuild") from None
        if not np.array_equal(stored, self.node_ids):
            raise IndexCorruptError(f"{self.index_dir}: node ids differ from the SKB; delete the folder to rebuild")

    def _build(self, layout: DocumentLayout, key: dict, progress: bool) -> None:
        import bm25s

        corpus = [layout.document(self.skb, int(i)) for i in self.node_ids]
        tokens = self.tokenizer.tokenize(corpus, update_vocab=True, return_as="tuple", show_progress=progress)
        model = bm25s.BM25(method=self.config.method, k1=self.config.k1, b=self.config.b)
        model.index(tokens, show_progress=progress)
        with atomic_dir(self.index_dir) as tmp:
            model.save(str(tmp / "model"))
            self.tokenizer.save_vocab(str(tmp))
            self.tokenizer.save_stopwords(str(tmp))
            np.save(tmp / "node_ids.npy", self.node_ids)
            (tmp / "complete.json").write_text(json.dumps({**key, "sha256": checksum(tmp)}, sort_keys=True, default=str))
        self.tokenizer = make_tokenizer(self.config)  # reloaded from disk below, as on every later run

    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        run = Run(self.name)
        if not queries:
            return run
        k = min(k, len(self.node_ids))
        announce("bm25", f"BM25 over {len(self.node_ids):,} candidate documents")
        q_tokens = self.tokenizer.tokenize([q.text for q in queries], update_vocab=False,
                                           return_as="ids", show_progress=False)
        docs, scores = self.model.retrieve(q_tokens, k=k, show_progress=progress, n_threads=0)
        for q, d, s in zip(queries, docs, scores, strict=True):
            keep = s > 0  # a zero BM25 score means no query term matched
            run.add(Ranking(q.qid, self.node_ids[d[keep]], s[keep], stage=self.name))
        return run
