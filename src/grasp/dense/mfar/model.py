"""mFAR's query-conditioned field weights:
score(q, d) = sum over (field f, scorer m) of softmax(W q + b)[f, m] * s_m(q, d_f)."""

from __future__ import annotations

import torch
from torch import nn


class FieldWeights(nn.Module):
    """W starts at zero, so the weights start uniform over the 2F (field, scorer) pairs.
    Output order: the F lexical weights, then the F dense weights."""

    def __init__(self, dim: int, n_fields: int) -> None:
        super().__init__()
        self.n_fields = n_fields
        self.proj = nn.Linear(dim, 2 * n_fields)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, query: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.proj(query), dim=-1)

    @staticmethod
    def combine(weights: torch.Tensor, lexical: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
        """weights (B, 2F); lexical, dense (B, C, F) -> scores (B, C)."""
        f = lexical.shape[-1]
        return (lexical * weights[:, None, :f]).sum(-1) + (dense * weights[:, None, f:]).sum(-1)
