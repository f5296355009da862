"""Manifests: what a trained artifact is, so that loading it can say when it does not fit.

Every trained artifact (mFAR weights, fusion settings, a reranker adapter) has a sidecar
``<artifact>.manifest.json``: the SKB it was made on, the splits and query counts it was trained or
tuned on, the configuration it depends on (``config``: checked when it is loaded), what it saw that
is recorded but not checked (``context``, e.g. the planner whose plans it was tuned on), the code
version, and a checksum of the artifact itself, so a manifest can never vouch for another file.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal

from grasp.errors import ArtifactMismatchError
from grasp.storage import Setting, checksum

MANIFEST_SUFFIX = ".manifest.json"
OnMismatch = Literal["error", "warn"]

# trained artifacts, by their name in a workspace
MFAR_WEIGHTS = "mfar/weights.pt"       # `grasp train mfar`: the best field weights
MFAR_ENCODER = "mfar/encoder"          # `grasp train mfar` with mfar.encoder_tuning=lora: the encoder's LoRA adapter
RERANKER_ADAPTER = "reranker/adapter"  # `grasp train reranker`: the LoRA adapter and its grasp_train.json
FUSION_SETTING = "fusion.json"         # `grasp tune fusion`: a FusionSetting


def final_fusion_artifact(trained: bool) -> str:
    """`grasp tune rerank [--zero-shot]`: a RerankFusionSetting."""
    return f"rerank-fusion-{'trained' if trained else 'zero-shot'}.json"


ARTIFACT_LABELS = {MFAR_WEIGHTS: "mFAR weights", RERANKER_ADAPTER: "reranker adapter", FUSION_SETTING: "fusion setting",
                   final_fusion_artifact(True): "final fusion (trained reranker)",
                   final_fusion_artifact(False): "final fusion (zero-shot reranker)"}


def manifest_path(artifact: Path) -> Path:
    """The sidecar beside a file or a folder artifact."""
    artifact = Path(artifact)
    return artifact.with_name(artifact.name + MANIFEST_SUFFIX)


@cache
def code_version() -> str:
    """``grasp <version>``, with the git commit when running from a checkout."""
    from grasp import __version__

    version = f"grasp {__version__}"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                                text=True, timeout=5, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{version} (git {commit})" if commit else version


@dataclass
class ArtifactManifest(Setting):
    """The record written beside a trained artifact (see the module docstring)."""

    kind: str = ""
    sha256: str = ""
    skb: dict[str, str] = field(default_factory=dict)      # name, fingerprint, schema
    data: dict[str, int] = field(default_factory=dict)     # split -> queries trained or tuned on
    config: dict[str, Any] = field(default_factory=dict)   # checked at load
    context: dict[str, Any] = field(default_factory=dict)  # recorded, not checked
    code: str = ""
    created: str = ""
    note: str = ""
    validated_on: list[str] = field(default_factory=list)  # other SKBs (fingerprints) it was evaluated on


def write_manifest(artifact: Path, *, kind: str, skb: dict[str, str], data: dict[str, int],
                   config: dict[str, Any], context: dict[str, Any] | None = None, note: str = "",
                   validated_on: list[str] | None = None, code: str | None = None) -> ArtifactManifest:
    """Describe ``artifact`` (which must be complete) in its sidecar, written atomically; ``code`` is the
    version that made it (default: this one)."""
    manifest = ArtifactManifest(kind=kind, sha256=checksum(artifact), skb=dict(skb), data=dict(data),
                                config=_plain(config), context=_plain(context or {}), code=code or code_version(),
                                created=datetime.now(UTC).isoformat(timespec="seconds"), note=note,
                                validated_on=list(validated_on or []))
    manifest.save(manifest_path(artifact))
    return manifest


def read_manifest(artifact: Path) -> ArtifactManifest | None:
    path = manifest_path(artifact)
    return ArtifactManifest.load(path) if path.exists() else None


def _plain(obj: Any) -> Any:
    """JSON's view of a value (tuples become lists), so recorded and expected values compare equal."""
    return json.loads(json.dumps(obj, default=str))


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# keys manifests began to record later, and what an artifact whose manifest lacks one was made with
# (mFAR's encoder was always the base one before it could be tuned); any other missing key is not checked
IMPLIED = {"mfar.encoder": "base"}


def differences(manifest: ArtifactManifest, expected: dict[str, Any]) -> dict[str, str]:
    """What this configuration expects that the artifact was not made with: key -> one phrase."""
    made = {**{k: v for k, v in IMPLIED.items() if k in expected}, **manifest.config}
    return {key: f"{key}: made with {_short(made[key])}, this configuration has {_short(want)}"
            for key, want in _plain(expected).items() if key in made and made[key] != want}


def verify(artifact: Path, *, label: str, skb: dict[str, str], expected: dict[str, Any], shipped: bool,
           on_mismatch: OnMismatch = "error", loadable: set[str] | None = None) -> ArtifactManifest | None:
    """Check ``artifact`` against the configuration that is about to use it.

    A changed artifact (checksum), another SKB for a workspace's own artifact, or a difference in
    ``expected`` is an :class:`ArtifactMismatchError` naming it, unless ``on_mismatch="warn"`` (then a
    warning) and every differing key is in ``loadable`` (the keys whose difference the artifact can
    still be loaded with: a differing dimension or field set can never load). A shipped artifact made
    on another SKB of the same schema is what shipping means: a warning says so, unless the manifest
    lists that SKB among those the artifact was evaluated on (the demo slice of pkg). An artifact without a
    manifest (made before grasp wrote them) loads with a warning that it cannot be checked.
    """
    manifest = read_manifest(artifact)
    if manifest is None:
        warnings.warn(f"{label} ({artifact}) has no manifest (made before grasp recorded them): not checked",
                      stacklevel=2)
        return None
    problems = []
    if manifest.sha256 != checksum(artifact):
        problems.append(f"the artifact changed after its manifest was written ({manifest_path(artifact).name})")
    other_skb = manifest.skb.get("fingerprint") not in (None, skb.get("fingerprint"))
    if other_skb and not shipped:
        problems.append(f"made on SKB {manifest.skb.get('name')} {manifest.skb.get('fingerprint')}, "
                        f"this is {skb.get('name')} {skb.get('fingerprint')}")
    diffs = differences(manifest, expected)
    can_load = not problems and set(diffs) <= (loadable or set())  # only configuration differences, all loadable
    problems += diffs.values()
    if problems:
        message = f"{label} ({artifact}) does not fit: " + "; ".join(problems)
        if on_mismatch == "warn" and can_load:
            warnings.warn(message + " (loaded anyway: artifacts.on_mismatch=warn)", stacklevel=2)
        else:
            hint = "; retrain it, or set artifacts.on_mismatch=warn to load it anyway" if can_load else ""
            raise ArtifactMismatchError(message + hint)
    if other_skb and shipped and skb.get("fingerprint") not in manifest.validated_on:
        warnings.warn(f"{label}: shipped for schema {manifest.skb.get('schema')}, made on "
                      f"{manifest.skb.get('name')} {manifest.skb.get('fingerprint')}; used for "
                      f"{skb.get('name')} {skb.get('fingerprint')}", stacklevel=2)
    return manifest
