"""What listwise training needs from a reranker kind: group logits, the parameters it learns (with
their learning rates), what a checkpoint keeps, and how the trained adapter is saved.

Each kind (bi-encoder, cross-encoder, LLM yes/no) implements :class:`TrainableScorer` beside its
inference class, so the text a kind reads and the score it computes exist once for training and
serving; :mod:`grasp.rerank.train` holds the loop they share.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import torch

from grasp.config import RerankerConfig
from grasp.errors import ConfigError


class TrainableScorer(ABC):
    """A reranker under training. ``net`` is the module whose ``requires_grad`` parameters are trained."""

    net: torch.nn.Module

    @abstractmethod
    def group_logits(self, queries: Sequence[str], docs: Sequence[str], sizes: Sequence[int]) -> torch.Tensor:
        """One logit per document, documents grouped by query in order (``sizes[i]`` for ``queries[i]``)."""

    def parameter_groups(self, cfg: RerankerConfig) -> list[dict]:
        """AdamW parameter groups; by default every trainable parameter at ``cfg.train.lr``."""
        return [{"params": [p for p in self.net.parameters() if p.requires_grad], "lr": cfg.train.lr}]

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """The trained tensors (what a checkpoint keeps; the frozen base is reloaded)."""
        names = {n for n, p in self.net.named_parameters() if p.requires_grad}
        return {k: v for k, v in self.net.state_dict().items() if k in names}

    def load_trainable_state(self, state: dict[str, torch.Tensor], *, source: Path | str = "checkpoint") -> None:
        """Load what :meth:`trainable_state` saved; a checkpoint of another model layout (e.g. the earlier
        [CLS]-head cross-encoder's) is refused instead of loading nothing."""
        wanted = set(self.trainable_state())
        if set(state) != wanted:
            raise ConfigError(f"{source} holds the trained tensors of another model layout ({len(set(state) - wanted)} "
                              f"unknown, {len(wanted - set(state))} missing): delete it to start over")
        self.net.load_state_dict(state, strict=False)

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write the trained adapter (and any head) into ``directory``."""

    @property
    def device(self) -> torch.device:
        return next(self.net.parameters()).device


def owners(sizes: Sequence[int], device) -> torch.Tensor:
    """The group index of every document: [0]*sizes[0] + [1]*sizes[1] + ..."""
    return torch.repeat_interleave(torch.arange(len(sizes), device=device), torch.tensor(list(sizes), device=device))
