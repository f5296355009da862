"""PyTerrier: GRASP as a ``pt.Transformer`` from a queries frame (``qid``, ``query``) to a result frame (``qid``,
``query``, ``docno``, ``score``, ``rank`` 0-based, plus ``name`` and ``type``; ``text`` on request), so that
``pt.Experiment([bm25, grasp], topics, qrels, eval_metrics=[...])`` compares it with anything PyTerrier runs; and the
project's queries, qrels and runs as PyTerrier's frames and back.

::

    from grasp import Searcher
    from grasp.adapters.pyterrier_transformer import GraspTransformer, topics_frame, qrels_frame
    grasp = GraspTransformer(Searcher.demo(), k=10)
    pt.Experiment([grasp], topics_frame(queries), qrels_frame(queries), eval_metrics=["recip_rank", "P@1"])
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

try:
    import pyterrier as pt
except ImportError as e:  # pragma: no cover - said to the user
    from grasp.errors import ConfigError

    raise ConfigError("the PyTerrier adapter needs pyterrier: pip install 'grasp-retrieval[pyterrier]'") from e

from grasp.api import Searcher, results_to_dataframe
from grasp.errors import InputError
from grasp.results import Query, Ranking, Run

RESULT_COLUMNS = ["qid", "query", "docno", "score", "rank", "name", "type"]


class GraspTransformer(pt.Transformer):
    """A :class:`~grasp.Searcher` (any method: ``auto``, ``grasp``, ``fused``, ``bm25``, ...) as a PyTerrier
    retrieval transformer. ``text=True`` adds each node's document as a ``text`` column (for a PyTerrier re-ranker
    downstream)."""

    def __init__(self, searcher: Searcher, k: int = 10, *, text: bool = False) -> None:
        self.searcher, self.k, self.text = searcher, k, text

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        missing = {"qid", "query"} - set(topics.columns)
        if missing:
            raise InputError(f"a PyTerrier queries frame needs the columns qid and query (missing: "
                             f"{', '.join(sorted(missing))})")
        queries = [Query(str(qid), str(text)) for qid, text in zip(topics["qid"], topics["query"], strict=True)]
        frame = results_to_dataframe(self.searcher.batch_search(queries, self.k)) if queries else \
            pd.DataFrame(columns=RESULT_COLUMNS)
        if self.text:
            frame["text"] = [self.searcher.document(int(d)) for d in frame["docno"]]
        return frame

    def __repr__(self) -> str:
        return f"GraspTransformer({self.searcher.skb.schema.name}, method={self.searcher.method}, k={self.k})"


def topics_frame(queries: Iterable[Query]) -> pd.DataFrame:
    """Queries as PyTerrier topics (``qid``, ``query``)."""
    return pd.DataFrame([{"qid": q.qid, "query": q.text} for q in queries], columns=["qid", "query"])


def qrels_frame(queries: Iterable[Query]) -> pd.DataFrame:
    """The gold answers as PyTerrier / ir_measures qrels (``qid``, ``docno``, ``label`` 1)."""
    return pd.DataFrame([{"qid": q.qid, "docno": str(a), "label": 1} for q in queries for a in q.answer_ids],
                        columns=["qid", "docno", "label"])


def run_to_frame(run: Run) -> pd.DataFrame:
    """A :class:`~grasp.results.Run` as a PyTerrier result frame (``qid``, ``docno``, ``score``, ``rank``)."""
    rows = [{"qid": qid, "docno": str(n), "score": float(s), "rank": i} for qid in run
            for i, (n, s) in enumerate(zip(run[qid].node_ids.tolist(), run[qid].scores.tolist(), strict=True))]
    return pd.DataFrame(rows, columns=["qid", "docno", "score", "rank"])


def frame_to_run(frame: pd.DataFrame, name: str = "pyterrier") -> Run:
    """A PyTerrier result frame (``qid``, ``docno``, ``score``; ``docno`` a node id) as a :class:`Run`, ranked by
    score, so that :func:`grasp.eval.evaluate.evaluate_run` and the fusions take PyTerrier's rankings."""
    missing = {"qid", "docno", "score"} - set(frame.columns)
    if missing:
        raise InputError(f"a PyTerrier result frame needs the columns qid, docno and score (missing: "
                         f"{', '.join(sorted(missing))})")
    run = Run(name)
    for qid, group in frame.groupby("qid", sort=False):
        group = group.sort_values("score", ascending=False, kind="stable")
        try:
            ids = [int(d) for d in group["docno"]]
        except ValueError:
            raise InputError(f"query {qid}: docno must be a node id (an integer)") from None
        run.add(Ranking(str(qid), ids, group["score"].astype(float).tolist(), stage=name))
    return run
