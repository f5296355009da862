"""Artifacts carry their provenance: manifests checked at load, checksums of indexes in `grasp info`."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from grasp.artifacts import (
    ARTIFACT_LABELS,
    ArtifactManifest,
    manifest_path,
    read_manifest,
    verify,
    write_manifest,
)
from grasp.cli import main
from grasp.errors import ArtifactMismatchError
from grasp.packaged import SHIPPED_MODELS
from grasp.storage import checksum
from tests.conftest import write_toy

SKB = {"name": "toy", "fingerprint": "f00d", "schema": "toy"}


@pytest.fixture
def artifact(tmp_path):
    path = tmp_path / "fusion.json"
    path.write_text('{"k": 60}')
    write_manifest(path, kind="fusion.json", skb=SKB, data={"val": 4}, config={"encoder": "e1", "dim": 384})
    return path


def test_a_manifest_describes_its_artifact(artifact):
    m = read_manifest(artifact)
    assert m.kind == "fusion.json" and m.data == {"val": 4} and m.skb == SKB
    assert m.sha256 == checksum(artifact) and m.code.startswith("grasp ")
    assert verify(artifact, label="fusion", skb=SKB, expected={"encoder": "e1", "dim": 384}, shipped=False) == m


def test_a_changed_artifact_or_configuration_is_refused(artifact):
    with pytest.raises(ArtifactMismatchError, match=r"encoder: made with 'e1', this configuration has 'e2'"):
        verify(artifact, label="fusion", skb=SKB, expected={"encoder": "e2"}, shipped=False)
    with pytest.raises(ArtifactMismatchError, match="made on SKB toy f00d, this is toy beef"):
        verify(artifact, label="fusion", skb={**SKB, "fingerprint": "beef"}, expected={}, shipped=False)
    artifact.write_text('{"k": 20}')
    with pytest.raises(ArtifactMismatchError, match="changed after its manifest was written"):
        verify(artifact, label="fusion", skb=SKB, expected={}, shipped=False)


def test_a_key_recorded_later_is_checked_as_what_older_artifacts_were_made_with(artifact):
    """A manifest written before mFAR's encoder could be tuned lacks mfar.encoder: it was the base encoder, so a
    configuration serving a tuned encoder must not load those weights over it; the base encoder still does."""
    with pytest.raises(ArtifactMismatchError, match=r"mfar.encoder: made with 'base', this configuration has 'lora:ab"):
        verify(artifact, label="mFAR weights", skb=SKB, expected={"mfar.encoder": "lora:ab12"}, shipped=False)
    assert verify(artifact, label="mFAR weights", skb=SKB, expected={"mfar.encoder": "base"}, shipped=False)


def test_warn_loads_what_can_load_and_never_what_cannot(artifact):
    with pytest.warns(UserWarning, match="encoder: made with 'e1'.*loaded anyway"):
        verify(artifact, label="fusion", skb=SKB, expected={"encoder": "e2"}, shipped=False, on_mismatch="warn",
               loadable={"encoder"})
    with pytest.raises(ArtifactMismatchError, match="dim: made with 384, this configuration has 768"):
        verify(artifact, label="fusion", skb=SKB, expected={"dim": 768}, shipped=False, on_mismatch="warn",
               loadable={"encoder"})


def test_shipped_artifacts_warn_on_another_skb_unless_validated_there(artifact):
    other = {**SKB, "fingerprint": "beef"}
    with pytest.warns(UserWarning, match="made on toy f00d; used for toy beef"):
        verify(artifact, label="fusion", skb=other, expected={}, shipped=True)
    m = read_manifest(artifact)
    m.validated_on = ["beef"]
    m.save(manifest_path(artifact))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        verify(artifact, label="fusion", skb=other, expected={}, shipped=True)


def test_a_zero_shot_final_fusion_serves_only_the_zero_shot_reranker_it_was_tuned_for(tmp_path):
    """pkg's shipped zero-shot final fusion was tuned (reranker.zero_shot=auto) with BM25 over the pool: the
    default (auto) loads it; a configuration naming the bi-encoder, or an untrained LLM yes/no reranker (its
    own zero-shot reranker), must not be fused with its (w, k)."""
    from grasp.artifacts import final_fusion_artifact
    from grasp.config import load_config
    from grasp.workspace import Workspace

    path = SHIPPED_MODELS / "pkg" / final_fusion_artifact(False)
    name = final_fusion_artifact(False)

    def expects(*overrides):
        ws = Workspace.open(write_toy(tmp_path / "toy"), load_config(None, [f"cache_dir={tmp_path / 'c'}", *overrides]),
                            progress=False)
        return ws.expects(name)

    assert "reranker.zero_shot" not in expects() and read_manifest(path).config["reranker.zero_shot"] == "bm25"
    verify(path, label="zs", skb=read_manifest(path).skb, expected=expects(), shipped=True)
    for overrides, want in ((["reranker.zero_shot=bi-encoder"], "bi-encoder"),
                            (["reranker.kind=llm-yes-no", f"reranker.model={tmp_path}"], f"llm-yes-no:{tmp_path}")):
        assert expects(*overrides)["reranker.zero_shot"] == want
        with pytest.raises(ArtifactMismatchError, match="reranker.zero_shot: made with 'bm25'"):
            verify(path, label="zs", skb=read_manifest(path).skb, expected=expects(*overrides), shipped=True)


def test_every_shipped_artifact_has_a_manifest_that_holds():
    found = 0
    for kb in ("bio", "pkg"):
        for name in ARTIFACT_LABELS:
            path = SHIPPED_MODELS / kb / name
            assert path.exists(), path
            m = ArtifactManifest.load(manifest_path(path))
            assert m.sha256 == checksum(path), f"{path}: shipped artifact changed; rerun scripts/write_shipped_manifests.py"
            assert m.skb["name"] == kb and m.skb["schema"] == kb and m.data, path
            found += 1
    assert found == 10


@pytest.mark.slow
def test_trained_weights_are_checked_when_loaded(tmp_path, capsys, monkeypatch):
    """`grasp train mfar` records a manifest. Shipped for the schema (a workspace's own are kept per
    configuration), the weights loaded with another field set or encoder are one line naming the
    difference, or a warning where the user asks for one and the weights can still load."""
    import shutil

    import grasp.workspace

    toy = write_toy(tmp_path / "toy")
    base = ["-q", "--cache-dir", str(tmp_path / "c"), "--set", "mfar.train.epochs=1", "--set", "mfar.train.batch_size=2",
            "--set", "mfar.train.train_split=test", "--set", "mfar.train.val_split=test", "--set", "encoder.max_length=128"]
    main([*base, "train", "mfar", "--skb", str(toy)])
    weights = next((tmp_path / "c").rglob("weights.pt"))
    m = read_manifest(weights)
    assert m.data == {"test": 2} and m.skb["name"] == "toy" and m.config["dim"] == 384
    assert m.config["weights"][0] == "bm25:name" and m.config["encoder"].endswith(":len128")
    shipped = tmp_path / "shipped"
    (shipped / "toy" / "mfar").mkdir(parents=True)
    for p in (weights, manifest_path(weights)):
        shutil.copy(p, shipped / "toy" / "mfar" / p.name)
    shutil.rmtree(weights.parent)
    monkeypatch.setattr(grasp.workspace, "SHIPPED_MODELS", shipped)
    capsys.readouterr()

    def eval_with(*extra):
        with pytest.raises(SystemExit) as e:
            main([*base, *extra, "eval", "--skb", str(toy), "--method", "mfar"])
        return e.value.code, capsys.readouterr().err

    code, err = eval_with("--set", 'mfar.fields=["name", "single"]')
    assert code == 2 and "mFAR weights" in err and "weights: made with ['bm25:name'" in err
    assert err.strip().count("\n") == 0
    code, err = eval_with("--set", "encoder.max_length=64")
    assert code == 2 and "encoder: made with 'st:sentence-transformers/all-MiniLM-L6-v2:len128'" in err
    assert "artifacts.on_mismatch=warn" in err
    with pytest.warns(UserWarning, match="loaded anyway"):
        main([*base, "--set", "encoder.max_length=64", "--set", "artifacts.on_mismatch=warn", "eval", "--skb",
              str(toy), "--method", "mfar"])


def test_info_prints_and_verifies_index_checksums(tmp_path, capsys):
    toy = write_toy(tmp_path / "toy")
    base = ["-q", "--cache-dir", str(tmp_path / "c"), "--set", "encoder.max_length=128"]
    main([*base, "index", "--skb", str(toy), "--method", "bm25", "--method", "dense"])
    record = next((tmp_path / "c").rglob("bm25-*/complete.json"))
    recorded = json.loads(record.read_text())["sha256"]
    assert recorded == checksum(record.parent, exclude=frozenset({"complete.json"}))
    capsys.readouterr()
    main([*base, "info", "--skb", str(toy), "--verify"])
    out = capsys.readouterr().out
    assert f"sha256 {recorded[:12]}  ok" in out and "every recorded checksum holds" in out
    vectors = next((tmp_path / "c").rglob("embeddings/doc-*.npy"))
    arr = np.load(vectors)
    arr[0, 0] += 1
    np.save(vectors, arr)
    main([*base, "info", "--skb", str(toy), "--verify"])
    out = capsys.readouterr().out
    assert "CHANGED since it was built" in out and "CHANGED: vectors embeddings/doc-" in out


def test_settings_tuned_on_synthetic_queries_never_replace_the_labelled_ones(tmp_path):
    """A workspace tuned on synthetic queries (`queries=synthetic`) keeps its settings apart: a labelled run of the
    same KB reads its own (or the shipped ones), never them."""
    from grasp.artifacts import FUSION_SETTING, final_fusion_artifact
    from grasp.config import load_config
    from grasp.workspace import Workspace

    toy = write_toy(tmp_path / "toy")

    def workspace(*overrides):
        return Workspace.open(toy, load_config(None, [f"cache_dir={tmp_path / 'c'}", "artifacts.shipped=false",
                                                      *overrides]), progress=False)

    synthetic, labelled = workspace("queries=synthetic"), workspace()
    assert synthetic.cache_dir == labelled.cache_dir
    for name in (FUSION_SETTING, final_fusion_artifact(False), final_fusion_artifact(True)):
        assert synthetic.artifact_path(name) == synthetic.cache_dir / "synthetic" / name
        assert labelled.artifact_path(name) == labelled.cache_dir / name
    made = synthetic.artifact_path(FUSION_SETTING)
    made.parent.mkdir(parents=True)
    made.write_text('{"k": 60}')
    assert synthetic.artifact(FUSION_SETTING) == made and labelled.artifact(FUSION_SETTING) is None
