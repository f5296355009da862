"""Fuzzing the open-format readers: seeded mutations of a KB's files (truncation, bit flips, bytes that are not
UTF-8, values of the wrong JSON type, huge and missing lines, damaged gzip) must each give a correct load or one
:class:`FormatError` naming the file, never another exception. A bounded number of cases runs in CI; more with
``GRASP_FUZZ_CASES=N``."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil

import pytest

from grasp.errors import FormatError
from grasp.skb import read_queries, read_skb
from tests.conftest import write_toy

CASES = int(os.environ.get("GRASP_FUZZ_CASES", "300"))
WRONG_TYPES = [None, 0, -1, 1.5, True, "", "x", [], [1], {}, {"a": 1}, "ééé", "\ud800"]


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def _flip_bits(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def _bad_utf8(data: bytes, rng: random.Random) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]) + data[i:]


def _wrong_type(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    try:
        rec = json.loads(lines[i])
    except ValueError:
        return _flip_bits(data, rng)
    if isinstance(rec, dict) and rec:
        key = rng.choice(sorted(rec))
        target = rec
        if isinstance(rec[key], dict) and rec[key] and rng.random() < 0.5:
            target, key = rec[key], rng.choice(sorted(rec[key]))
        target[key] = rng.choice(WRONG_TYPES)
        lines[i] = json.dumps(rec).encode()
    return b"\n".join(lines)


def _huge_line(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    lines.insert(rng.randrange(len(lines) + 1), rng.choice([b"x", b"{", b"\t", b"1\t"]) * 1_000_000)
    return b"\n".join(lines)


def _drop_or_repeat_line(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    if rng.random() < 0.5:
        del lines[i]
    else:
        lines.insert(i, lines[i])
    return b"\n".join(lines)


def _swap_columns(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    parts = lines[i].split(b"\t")
    rng.shuffle(parts)
    lines[i] = b"\t".join(parts)
    return b"\n".join(lines)


MUTATIONS = [_truncate, _flip_bits, _bad_utf8, _wrong_type, _huge_line, _drop_or_repeat_line, _swap_columns]
FILES = ["nodes.jsonl", "edges.tsv", "schema.json", "qa/queries.jsonl"]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    return write_toy(root / "plain"), write_toy(root / "gz", gzip=True)


def _mutate(src, dst, case: int):
    rng = random.Random(case)
    shutil.copytree(src, dst)
    name = rng.choice(FILES)
    packed = name in ("nodes.jsonl", "edges.tsv") and (dst / f"{name}.gz").exists()
    path = dst / (f"{name}.gz" if packed else name)
    data = gzip.decompress(path.read_bytes()) if packed else path.read_bytes()
    mutation = rng.choice(MUTATIONS)
    data = mutation(data, rng) if data else data
    if packed and rng.random() < 0.3:  # damage the compressed stream itself
        path.write_bytes(rng.choice([_truncate, _flip_bits])(gzip.compress(data, mtime=0), rng))
    else:
        path.write_bytes(gzip.compress(data, mtime=0) if packed else data)
    return f"{mutation.__name__} on {path.name}"


@pytest.mark.parametrize("case", range(CASES))
def test_a_mutated_kb_loads_correctly_or_fails_with_one_format_error(pristine, tmp_path, case):
    src = pristine[case % 2]
    what = _mutate(src, tmp_path / "kb", case)
    try:
        skb = read_skb(tmp_path / "kb")
        queries = read_queries(tmp_path / "kb" / "qa" / "queries.jsonl")
    except FormatError as e:
        message = str(e)
        assert message and "\n" not in message.strip(), (what, message)
        assert str(tmp_path / "kb") in message, (what, message)  # names the file
        return
    except Exception as e:  # noqa: BLE001 - what the fuzzer looks for
        pytest.fail(f"case {case} ({what}): {type(e).__name__}: {e}")
    # a load: the graph is consistent
    assert len(skb.names) == skb.num_nodes and skb.edge_src.shape == skb.edge_dst.shape
    assert skb.num_edges == 0 or (0 <= skb.edge_src.min() and skb.edge_dst.max() < skb.num_nodes)
    assert all(isinstance(q.text, str) and q.text.strip() for q in queries)
    texts = [*skb.names, *(v for f in skb.fields for value in f.values() for v in ([value] if isinstance(value, str) else value))]
    assert all(isinstance(t, str) and t.encode("utf-8") for t in texts)  # every text can be written out again
