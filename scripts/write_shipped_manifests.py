"""Write the manifests of the artifacts shipped in ``src/grasp/data/models/{bio,pkg}``.

Some of these artifacts were made before grasp wrote manifests. This script records, after the fact,
what the recipe (docs/own-kb.md, docs/experiments.md) made them on: the SKB, the splits
and query counts its commands select, and the configuration (the defaults) the published rows were
produced and reproduced with; the checksum is of the shipped file itself. The demo KB (a slice of pkg
whose tests put floors under its numbers with pkg's artifacts) is listed as validated for pkg's.
An artifact whose manifest grasp wrote when it was made (bio's fusion settings, retuned on nested
plans) keeps that manifest.

    python scripts/write_shipped_manifests.py --shared ../shared
"""

from __future__ import annotations

import argparse
from pathlib import Path

from grasp.artifacts import (
    ARTIFACT_LABELS,
    FUSION_SETTING,
    MFAR_WEIGHTS,
    RERANKER_ADAPTER,
    code_version,
    manifest_path,
    read_manifest,
    write_manifest,
)
from grasp.methods import mfar_expects
from grasp.packaged import DEMO_SKB, SHIPPED_MODELS
from grasp.rerank.retriever import RerankFusionSetting
from grasp.workspace import Workspace

NOTE = ("manifest written after the fact from the recipe and the default configuration the published rows were "
        "reproduced with")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=Path("../shared"))
    args = ap.parse_args()
    demo = Workspace.open(DEMO_SKB, progress=False).skb.fingerprint
    for kb in ("bio", "pkg"):
        ws = Workspace.open(args.shared / "data" / "skb" / kb, progress=False)
        n = {split: len(ws.queries(split=split)) for split in ("train", "val")}
        planner = {"planner": {"kind": "local", "model": ws.config.planner.model, "format": "flat", "samples": 1}}
        for name in ARTIFACT_LABELS:
            path = SHIPPED_MODELS / kb / name
            if not path.exists():
                continue
            made = read_manifest(path)
            if made is not None and made.note != NOTE:  # written by grasp when the artifact was made: keep it,
                if kb == "pkg" and made.validated_on != [demo]:  # naming the demo slice as it is now
                    made.validated_on = [demo]
                    made.save(manifest_path(path))
                print(f"{kb}: {name} keeps the manifest it was made with ({made.code})")
                continue
            if name == MFAR_WEIGHTS:
                check, data, context = mfar_expects(ws), {"train": n["train"], "val": n["val"]}, {}
            elif name == RERANKER_ADAPTER:
                check, data, context = ws.expects(name), {"train": n["train"]}, {"pool": "mfar"}
            else:
                tuned = RerankFusionSetting.load(path) if name != FUSION_SETTING else None
                split, count = (tuned.split, tuned.n) if tuned else ("val", 85 if kb == "bio" else 100)
                check, data, context = ws.expects(name), {split: count}, planner
            manifest = write_manifest(path, kind=name, skb=ws.skb_identity, data=data, config=check, context=context,
                                      note=NOTE, validated_on=[demo] if kb == "pkg" else [],
                                      code=f"made before manifests (manifest by {code_version()})")
            print(f"{kb}: {name} {manifest.sha256[:12]} {data}")


if __name__ == "__main__":
    main()
