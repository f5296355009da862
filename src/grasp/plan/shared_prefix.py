"""Attention over a prompt prefix a whole batch shares, read once per layer instead of once per row.

The torch planner (:mod:`grasp.plan.torch_llm`) decodes many requests whose prompts share the ~2,500-token system
prompt. :func:`shared_prefix_layer_class` is a transformers cache layer holding that prefix's keys and values once
(batch 1) beside each row's own tokens in a buffer with room to grow; while :class:`shared_prefix` is active, the
model's attention goes through :func:`_shared_prefix_attention`, which scores every row's queries against the prefix
in one product per key/value head and adds the rows' own tokens under one softmax (tested against transformers' own
greedy generation).
"""

from __future__ import annotations

from functools import cache

_ATTENTION = "grasp_shared_prefix"
_ACTIVE: dict[str, object] = {}  # "cache": the cache whose shared prefix the attention reads (one decoding thread)


@cache
def shared_prefix_layer_class():
    from transformers.cache_utils import DynamicLayer

    class SharedPrefixLayer(DynamicLayer):
        """One layer's cache for a batch that shares a prompt prefix: the prefix's keys and values once
        (batch 1), and each row's own tokens in a buffer with room to grow (a decoding step writes in place,
        where transformers' DynamicLayer copies the whole cache at every step). ``update`` returns the rows'
        own keys and values; :func:`_shared_prefix_attention` adds the prefix. Reading the ~2,500-token
        prefix once per layer instead of once per row is most of a batched step's memory traffic saved."""

        def __init__(self, prefix_keys, prefix_values, batch: int, room: int) -> None:
            super().__init__()
            self.device = prefix_keys.device
            self.prefix_keys, self.prefix_values = prefix_keys, prefix_values
            _, h, self.n_prefix, d = prefix_keys.shape
            self._k = prefix_keys.new_empty((batch, h, room, d))
            self._v = prefix_values.new_empty((batch, h, room, prefix_values.shape[-1]))
            self._n = 0
            self._views()
            self.is_initialized = True

        def _views(self) -> None:
            self.keys, self.values = self._k[:, :, : self._n], self._v[:, :, : self._n]

        def update(self, key_states, value_states, *args, **kwargs):
            m = key_states.shape[-2]
            if self._n + m > self._k.shape[2]:  # out of room: grow (not expected: room covers max_tokens)
                grow = max(m, 256)
                self._k = _with_room(self._k[:, :, : self._n], grow)
                self._v = _with_room(self._v[:, :, : self._n], grow)
            self._k[:, :, self._n : self._n + m] = key_states
            self._v[:, :, self._n : self._n + m] = value_states
            self._n += m
            self._views()
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.n_prefix + self._n

        def crop(self, tokens_to_remove: int) -> None:
            """Forget the last ``-tokens_to_remove`` of the rows' own tokens (a rejected draft's), as transformers'
            layers do."""
            if tokens_to_remove > 0:
                raise ValueError("crop takes a negative count of tokens to remove")
            self._n = max(0, self._n + tokens_to_remove)
            self._views()

        def batch_select_indices(self, indices) -> None:
            self._k, self._v = self._k[indices], self._v[indices]  # one copy when rows leave the batch
            self._views()

    return SharedPrefixLayer


def _with_room(x, room: int):
    """``x`` (batch, heads, length, dim) copied into a tensor with ``room`` more positions."""
    import torch

    return torch.cat([x, x.new_empty((*x.shape[:2], room, x.shape[-1]))], dim=2)


@cache
def _register_attention() -> None:
    """Make :func:`_shared_prefix_attention` (with SDPA's masks) selectable as ``_ATTENTION``, once."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(_ATTENTION, _shared_prefix_attention)
    AttentionMaskInterface.register(_ATTENTION, sdpa_mask)


def _shared_prefix_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Attention of a batch over its shared prefix and each row's own tokens, as one softmax: the prefix's
    scores come from one product per key/value head over every row's queries (the prefix read once), the
    own tokens' from the rows' own caches; the mask transformers built over prefix + own is split between
    them. Without an active shared-prefix cache (computing the prefix itself) it is plain SDPA."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    cache = _ACTIVE.get("cache")
    if cache is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    layer = cache.layers[module.layer_idx]
    b, h, q, d = query.shape
    kvh = key.shape[1]
    g = h // kvh
    pk, pv = layer.prefix_keys[0], layer.prefix_values[0]  # (kvh, P, d)
    n_prefix, n_own = pk.shape[1], key.shape[2]
    qg = query.reshape(b, kvh, g * q, d)  # query head j reads key/value head j // g
    folded = qg.transpose(0, 1).reshape(kvh, b * g * q, d)
    scores_prefix = (folded @ pk.transpose(1, 2)).reshape(kvh, b, g * q, n_prefix).transpose(0, 1)
    scores = torch.cat([scores_prefix, qg @ key.transpose(-1, -2)], dim=-1).float() * (scaling or d**-0.5)
    if attention_mask is None:  # transformers left it out: nothing padded, so only causality within the own tokens
        own = torch.arange(n_own - q, n_own)[:, None] >= torch.arange(n_own)[None, :]
        allowed = torch.cat([torch.ones(q, n_prefix, dtype=torch.bool), own], dim=-1)[None, None]
        allowed = allowed.expand(b, 1, q, n_prefix + n_own)
    elif attention_mask.dtype == torch.bool:
        allowed = attention_mask[..., -(n_prefix + n_own):]
    else:
        allowed = attention_mask[..., -(n_prefix + n_own):] > torch.finfo(attention_mask.dtype).min / 2
    allowed = allowed.unsqueeze(2).expand(b, allowed.shape[1], g, q, n_prefix + n_own).reshape(b, -1, g * q,
                                                                                                n_prefix + n_own)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).to(value.dtype)
    w_prefix = weights[..., :n_prefix].transpose(0, 1).reshape(kvh, b * g * q, n_prefix)
    out = (w_prefix @ pv).reshape(kvh, b, g * q, d).transpose(0, 1) + weights[..., n_prefix:] @ value
    return out.reshape(b, h, q, d).transpose(1, 2).contiguous(), None


class shared_prefix:  # noqa: N801 - used as a context manager
    """Route the model's attention through :func:`_shared_prefix_attention` while ``cache`` decodes."""

    def __init__(self, model, cache) -> None:
        self.model, self.cache = model, cache

    def __enter__(self):
        if self.cache is None:
            return self
        _register_attention()
        self._before = self.model.config._attn_implementation
        self.model.set_attn_implementation(_ATTENTION)
        _ACTIVE["cache"] = self.cache
        return self

    def __exit__(self, *exc) -> None:
        if self.cache is not None:
            _ACTIVE.pop("cache", None)
            self.model.set_attn_implementation(self._before)
