"""Configuration: defaults, TOML file, overrides, clear errors."""

from __future__ import annotations

import pytest

from grasp.config import GraspConfig, load_config
from grasp.errors import ConfigError


def test_defaults_match_the_paper_and_issue():
    c = GraspConfig()
    assert (c.bm25.k1, c.bm25.b, c.bm25.method) == (1.2, 0.75, "lucene")
    assert c.encoder.model == "minilm" and c.search.depth == 100


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


def test_renamed_field_names_its_new_name(tmp_path):
    with pytest.raises(ConfigError, match="'eval.k' is now 'search.depth'"):
        load_config(None, ["eval.k=50"])
    assert load_config(None, ["search.depth=50"]).search.depth == 50
    with pytest.raises(ConfigError, match="'reranker.epochs' is now 'reranker.train.epochs'"):
        load_config(None, ["reranker.epochs=4"])
    with pytest.raises(ConfigError, match="'mfar.hard_negative_ranks' is now 'mfar.train.hard_negative_ranks'"):
        load_config(None, ["mfar.hard_negative_ranks=[1, 2]"])


def test_one_place_resolves_the_cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("GRASP_CACHE_DIR", str(tmp_path / "env"))
    assert GraspConfig().cache_root == tmp_path / "env"
    assert GraspConfig(cache_dir=tmp_path / "mine").cache_root == tmp_path / "mine"


def test_training_arguments_have_their_own_sections_and_mark_what_may_change_on_resume():
    """What identifies a trained reranker's folder and what a resumed run may change follow from the types."""
    from grasp.config import MFARConfig, RerankerConfig, RerankerTrainingConfig, marked

    assert marked(RerankerTrainingConfig, "resumable") == {"epochs", "save_every", "val_split", "eval_every",
                                                           "eval_queries"}
    identity = set(RerankerConfig.model_fields) - marked(RerankerConfig, "serving_only") - {"train"}
    assert identity == {"model", "kind", "max_length", "max_field_tokens", "max_neighbors"}
    assert "epochs" not in MFARConfig.model_fields and "epochs" in MFARConfig().train.model_fields


def test_training_settings_live_in_the_stage_sections():
    c = load_config(None, ["reranker.train.lora_dropout=0.1", "reranker.train.save_every=5", "mfar.train.hard_negative_ranks=[11, 20]"])
    assert (c.reranker.train.lora_dropout, c.reranker.train.save_every, c.mfar.train.hard_negative_ranks) == (0.1, 5, (11, 20))
    with pytest.raises(ConfigError, match="reranker.train.lora_dropout"):
        load_config(None, ["reranker.train.lora_dropout=1.5"])


def test_settings_round_trip_and_bad_files_name_the_field(tmp_path):
    from grasp.errors import FormatError
    from grasp.fuse.retriever import FusionSetting
    from grasp.rerank.retriever import RerankFusionSetting

    s = FusionSetting("dynamic", 40.0, w_bucket=[1.0, 1.4, 0.4, 0.1, 0.05],
                      m_risk={"no_trade": 0.0, "weak": 0.5, "normal": 1.5, "aggressive": 1.0}, val_hit1=0.59)
    s.save(tmp_path / "f.json")
    assert FusionSetting.load(tmp_path / "f.json") == s
    (tmp_path / "r.json").write_text('{"w": 0.45, "k": 20.0, "depht": 30}')
    with pytest.raises(FormatError, match=r"r\.json.*depht"):
        RerankFusionSetting.load(tmp_path / "r.json")
    (tmp_path / "r.json").write_text('{"w": 0.45}')
    with pytest.raises(FormatError, match="not a RerankFusionSetting"):
        RerankFusionSetting.load(tmp_path / "r.json")
    (tmp_path / "r.json").write_text("{")
    with pytest.raises(FormatError, match="not a readable"):
        RerankFusionSetting.load(tmp_path / "r.json")


def test_a_setting_saved_under_a_former_field_name_loads(tmp_path):
    """Final-fusion and fusion settings saved when RRF's constant was called ``k`` (the shipped ones) load as
    ``rrf_k``; a fusion setting's ``dense_method`` kept in its ``info`` becomes the field."""
    from grasp.fuse.retriever import FusionSetting
    from grasp.rerank.retriever import RerankFusionSetting

    (tmp_path / "r.json").write_text('{"w": 0.45, "k": 20.0, "k_bucket": [1.0, 2.0, 3.0], "bucket_edges": [0, 10], '
                                     '"w_bucket": [0.1, 0.2, 0.3]}')
    r = RerankFusionSetting.load(tmp_path / "r.json")
    assert (r.rrf_k, r.rrf_k_bucket) == (20.0, [1.0, 2.0, 3.0])
    (tmp_path / "f.json").write_text('{"mode": "static", "k": 40.0, "w": 0.4, "info": {"dense_method": "dense"}}')
    f = FusionSetting.load(tmp_path / "f.json")
    assert (f.rrf_k, f.dense_method, f.info) == (40.0, "dense", {})
