"""Fetch STaRK's processed knowledge bases from the Hugging Face Hub.

Needs the network. Where the Hub cannot be reached, the error says how to proceed offline:
put the processed files in a directory and pass it as ``--skb DIR``.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from grasp.errors import OfflineError
from grasp.skb.stark import DATASETS

HUB_REPO = "snap-stanford/stark"


def offline_help(name: str, dest: Path) -> str:
    spec = DATASETS[name]
    return (
        f"could not download stark-{name} from the Hugging Face Hub ({HUB_REPO}, {spec.hub_processed}). "
        f"Offline: on a machine with access, fetch {spec.hub_processed} from the dataset repo {HUB_REPO}, "
        f"unzip it so that {dest}/processed/node_info.pkl exists, copy that folder here, and run "
        f"`grasp eval --skb {dest}/processed --stark-dataset {name} ...`; the QA files are under qa/{spec.qa_folder} "
        f"in the same repo."
    )


def download_stark(name: str, dest: Path | str) -> Path:
    """Download and unzip ``skb/<dataset>/processed.zip`` into ``dest``; returns the processed dir."""
    if name not in DATASETS:
        raise ValueError(f"unknown STaRK dataset {name!r}; known: {', '.join(DATASETS)}")
    dest = Path(dest)
    spec = DATASETS[name]
    try:
        from huggingface_hub import hf_hub_download

        zip_path = hf_hub_download(HUB_REPO, spec.hub_processed, repo_type="dataset", etag_timeout=10)
    except Exception as e:  # no network, DNS failure, offline mode, 404: all end the same way
        raise OfflineError(f"{offline_help(name, dest)} (cause: {type(e).__name__})") from None
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(dest)
    processed = next(dest.rglob("node_info.pkl")).parent
    return processed
