"""BM25 over the full documents of candidate nodes (``bm25s``; Lucene's variant by default)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from grasp.config import BM25Config
from grasp.errors import IndexCorruptError
from grasp.progress import announce
from grasp.results import Query, Ranking, Run
from grasp.retriever import Retriever
from grasp.skb.documents import DocumentLayout
from grasp.skb.graph import SKB
from grasp.storage import atomic_dir, build_lock, checksum, recorded_sha256, require_intact, stable_hash


def make_tokenizer(config: BM25Config):
    import bm25s

    stemmer = None
    if config.stemmer:
        import Stemmer

        stemmer = Stemmer.Stemmer(config.stemmer)
    return bm25s.tokenization.Tokenizer(stopwords=config.stopwords or [], stemmer=stemmer)


def _document_chunks(skb: SKB, layout: DocumentLayout, node_ids: np.ndarray, bar, size: int = 20_000,
                     on_chunk: Callable[[int, list[str]], None] | None = None) -> Iterator[list[str]]:
    for lo in range(0, len(node_ids), size):
        chunk = [layout.document(skb, int(i)) for i in node_ids[lo:lo + size]]
        if on_chunk is not None:
            on_chunk(lo, chunk)
        bar.update(len(chunk))
        yield chunk


_SCORE_SLICE = 1 << 24


def _concatenate(parts: list[np.ndarray], dtype) -> np.ndarray:
    """One array of the parts, each released once copied (np.concatenate would hold every part beside the result)."""
    out = np.empty(sum(p.size for p in parts), dtype=dtype)
    lo = 0
    while parts:
        part = parts.pop(0)
        out[lo:lo + part.size] = part
        lo += part.size
    return out


def index_in_chunks(model, tokenizer, chunks: Iterable[list[str]]) -> None:
    """Index a corpus given chunk by chunk into the bm25s ``model``, with the scores, vocabulary and parameters
    that ``model.index(tokenizer.tokenize(corpus, update_vocab=True, return_as="tuple"))`` gives (tested
    against it), without holding the corpus, or its tokens as Python ints (bm25s' own index step keeps every
    token: about 36 bytes each), in memory: each chunk is reduced at once to (term, count) arrays sorted by document,
and the number of distinct terms of each document."""
    import scipy.sparse as sp
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    terms, counts, per_doc, lengths, base = [], [], [], [], 0
    for texts in chunks:
        ids = tokenizer.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
        lens = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lens.sum()))
        pair, tf = np.unique((np.repeat(np.arange(len(ids)), lens) << 32) | flat, return_counts=True)
        per_doc.append(np.bincount(pair >> 32, minlength=len(ids)))  # distinct terms of each document
        terms.append((pair & 0xFFFFFFFF).astype(np.int32))
        counts.append(tf.astype(np.float32))
        lengths.append(lens)
        base += len(ids)
    vocab = tokenizer.get_vocab_dict()
    n_docs, n_vocab = base, len(vocab)
    # (document, term) pairs sorted by document, then term: with the documents' pair counts as row pointers they
    # are a CSR matrix as they stand; the counts become the scores in place
    term, tf = _concatenate(terms, np.int32), _concatenate(counts, np.float32)
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(np.concatenate(per_doc) if per_doc else np.zeros(0, np.int64), out=indptr[1:])
    doc_len = np.concatenate(lengths).astype(np.float32) if lengths else np.zeros(0, np.float32)
    avg_len = float(doc_len.mean()) if doc_len.size else 0.0
    df = np.bincount(term, minlength=n_vocab)
    idf_of = _select_idf_scorer(model.idf_method)
    idf = np.zeros(n_vocab, dtype=np.float32)
    for value in np.unique(df[df > 0]).tolist():  # the scorers take one df at a time
        idf[df == value] = idf_of(value, N=n_docs)
    tfc = _select_tfc_scorer(model.method)
    model.nonoccurrence_array = None
    if model.method in model.methods_requiring_nonoccurrence:
        model.nonoccurrence_array = np.where(df > 0, idf * tfc(tf_array=0, l_d=avg_len, l_avg=avg_len, k1=model.k1,
                                                               b=model.b, delta=model.delta), 0).astype(np.float32)
    for lo in range(0, tf.size, _SCORE_SLICE):  # a slice at a time: the scorer's temporaries stay small
        sl = slice(lo, lo + _SCORE_SLICE)
        doc = np.searchsorted(indptr, np.arange(lo, min(lo + _SCORE_SLICE, tf.size)), side="right") - 1
        part = idf[term[sl]] * tfc(tf_array=tf[sl], l_d=doc_len[doc], l_avg=avg_len, k1=model.k1, b=model.b,
                                   delta=model.delta)
        if model.nonoccurrence_array is not None:
            part -= model.nonoccurrence_array[term[sl]]
        tf[sl] = part
    if tf.size < 2**31:
        indptr = indptr.astype(np.int32)  # scipy would otherwise widen the term ids to int64 as well
    matrix = sp.csr_matrix((tf, term, indptr), shape=(n_docs, n_vocab), dtype=np.float32)
    del tf, term, indptr
    matrix = matrix.tocsc()  # scipy's CSR -> CSC allocates only its output
    model.scores = {"data": matrix.data, "indices": matrix.indices, "indptr": matrix.indptr, "num_docs": n_docs}
    if "" not in vocab:  # as bm25s' create_empty_token
        vocab[""] = max(vocab.values(), default=-1) + 1
    model.vocab_dict = vocab
    model.unique_token_ids_set = set(vocab.values())


class BM25Retriever(Retriever):
    """Sparse lexical baseline. The index is saved under ``root`` and reused while the SKB,
    layout and BM25 settings are unchanged."""

    name = "bm25"

    def __init__(self, skb: SKB, layout: DocumentLayout, root: Path, config: BM25Config | None = None,
                 *, progress: bool = True, node_ids: np.ndarray | None = None,
                 on_chunk: Callable[[int, list[str]], None] | None = None) -> None:
        """``on_chunk(first row, texts)`` sees each chunk of rendered documents when the index is built (a
        caller that needs something else of the same texts renders them once)."""
        import bm25s

        self.skb = skb
        self.config = config or BM25Config()
        self.node_ids = skb.candidate_ids if node_ids is None else np.asarray(node_ids, dtype=np.int64)
        key = {"skb": skb.fingerprint, "layout": layout.key, "bm25": self.config.model_dump(),
               "nodes": stable_hash(self.node_ids.tolist()), "format": 1}
        self.index_dir = Path(root) / f"bm25-{stable_hash(key)}"
        self.tokenizer = make_tokenizer(self.config)
        with build_lock(self.index_dir):
            if not (self.index_dir / "complete.json").exists():
                self._build(layout, key, progress, on_chunk)
        require_intact(self.index_dir, recorded_sha256(self.index_dir / "complete.json"), "BM25 index",
                       exclude=frozenset({"complete.json"}))
        try:
            self.model = bm25s.BM25.load(str(self.index_dir / "model"), mmap=True)  # pages read on demand
            self.tokenizer.load_vocab(str(self.index_dir))
            self.tokenizer.load_stopwords(str(self.index_dir))
            stored = np.load(self.index_dir / "node_ids.npy")
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
            raise IndexCorruptError(f"{self.index_dir}: broken BM25 index ({e}); delete the folder to rebuild") from None
        if not np.array_equal(stored, self.node_ids):
            raise IndexCorruptError(f"{self.index_dir}: node ids differ from the SKB; delete the folder to rebuild")

    def _build(self, layout: DocumentLayout, key: dict, progress: bool, on_chunk) -> None:
        import bm25s

        model = bm25s.BM25(method=self.config.method, k1=self.config.k1, b=self.config.b)
        bar = tqdm(total=len(self.node_ids), desc=f"BM25 {layout.name}", unit="doc", disable=not progress)
        index_in_chunks(model, self.tokenizer, _document_chunks(self.skb, layout, self.node_ids, bar,
                                                                on_chunk=on_chunk))
        bar.close()
        with atomic_dir(self.index_dir) as tmp:
            model.save(str(tmp / "model"))
            self.tokenizer.save_vocab(str(tmp))
            self.tokenizer.save_stopwords(str(tmp))
            np.save(tmp / "node_ids.npy", self.node_ids)
            (tmp / "complete.json").write_text(json.dumps({**key, "sha256": checksum(tmp)}, sort_keys=True, default=str))
        self.tokenizer = make_tokenizer(self.config)  # reloaded from disk below, as on every later run

    @cached_property
    def _order(self) -> np.ndarray:
        return np.argsort(self.node_ids, kind="stable")

    def node_scores(self, text: str, ids: np.ndarray) -> np.ndarray:
        """BM25 score of ``text`` against each node's document (0 for a node this index does not hold): how
        Stage 1 weighs the words of a plan's relevance text and of the query among its candidates."""
        tokens = self.tokenizer.tokenize([text], update_vocab=False, return_as="ids", show_progress=False)[0]
        every = self.model.get_scores(tokens)
        ids = np.asarray(ids, dtype=np.int64)
        if self.node_ids.size == 0:
            return np.zeros(ids.size)
        order = self._order
        at = order[np.minimum(np.searchsorted(self.node_ids, ids, sorter=order), order.size - 1)]
        return np.where(self.node_ids[at] == ids, every[at], 0.0)

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
