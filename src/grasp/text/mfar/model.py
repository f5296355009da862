"""mFAR's query-conditioned field weights:
score(q, d) = sum over (field f, scorer m) of softmax(W q + b)[f, m] * s_m(q, d_f)."""

from __future__ import annotations

import torch
from torch import nn


class FieldWeights(nn.Module):
    """W starts at zero, so the weights start uniform over the active (field, scorer) pairs.
    Output order: the F lexical weights, then the F dense weights; a field without a dense scorer
    (``dense_active[f]`` false) gets dense weight 0."""

    def __init__(self, dim: int, n_fields: int, dense_active: list[bool] | None = None) -> None:
        super().__init__()
        self.n_fields = n_fields
        self.proj = nn.Linear(dim, 2 * n_fields)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)
        active = [True] * n_fields + list(dense_active if dense_active is not None else [True] * n_fields)
        self.register_buffer("inactive", ~torch.tensor(active), persistent=False)

    def forward(self, query: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.proj(query).masked_fill(self.inactive, float("-inf")), dim=-1)

    @staticmethod
    def combine(weights: torch.Tensor, lexical: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        """weights (B, 2F); lexical, dense (B, C, F) -> scores (B, C). The one scoring rule of training
        and search."""
        f = lexical.shape[-1]
        return (lexical * weights[:, None, :f]).sum(-1) + (dense * weights[:, None, f:]).sum(-1)
