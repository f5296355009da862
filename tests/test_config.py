"""Configuration: defaults, TOML file, overrides, clear errors."""

from __future__ import annotations

import pytest

from grasp.config import GraspConfig, load_config
from grasp.errors import ConfigError


def test_defaults_match_the_paper_and_issue():
    c = GraspConfig()
    assert (c.bm25.k1, c.bm25.b, c.bm25.method) == (1.2, 0.75, "lucene")
    assert c.encoder.model == "minilm" and c.eval.k == 100


def test_file_then_overrides(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[encoder]\nmax_length = 512\n[bm25]\nk1 = 0.9\n')
    c = load_config(f, ["bm25.k1=1.5", "vector_index.backend=faiss", "document_layout=stark-prime"])
    assert c.encoder.max_length == 512 and c.bm25.k1 == 1.5
    assert c.vector_index.backend == "faiss" and c.document_layout == "stark-prime"


@pytest.mark.parametrize("over, msg", [
    (["bm25.b=2"], "bm25.b"), (["encoder.kind=magic"], "encoder.kind"), (["nosuch.key=1"], "nosuch"),
])
def test_bad_values(over, msg):
    with pytest.raises(ConfigError, match=msg):
        load_config(None, over)


def test_bad_file(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[encoder\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(f)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")
