"""The command-line contract: ``grasp eval`` and friends, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grasp.cli import main
from tests.conftest import DEMO_SKB, REPO, write_toy


def grasp(*args, env=None):
    """Run the real CLI in a subprocess; returns (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "grasp.cli", *args], capture_output=True, text=True, env=env, timeout=600)
    return p.returncode, p.stdout, p.stderr


def test_eval_contract(toy_dir, tmp_path, cache_dir, capsys):
    out = tmp_path / "r.json"
    main(["-q", "eval", "--skb", str(toy_dir), "--method", "bm25", "--split", "test", "--output-json", str(out),
          "--run-file", str(tmp_path / "run.trec"), "--report-md", str(tmp_path / "r.md")])
    rep = json.loads(out.read_text())
    assert rep["method"] == "bm25" and rep["n"] == 2
    # the toy's two test queries: BM25 ranks B3GALT6 (galactosyltransferase) and a sodium gene on chromosome 2 first
    assert {m: rep[m] for m in ("hit@1", "hit@5", "recall@20", "mrr")} == {"hit@1": 1.0, "hit@5": 1.0,
                                                                          "recall@20": 1.0, "mrr": 1.0}
    assert rep["per_template"]["gene_text"]["n"] == 1
    assert (tmp_path / "run.trec").read_text().startswith("0 Q0 0 1 ")
    assert "| bm25 | 2 |" in (tmp_path / "r.md").read_text()
    assert (cache_dir / "skb").exists()  # the env var chose the cache root


def test_eval_limit_and_queries_file(toy_dir, tmp_path, cache_dir):
    qfile = tmp_path / "heldout.jsonl"
    qfile.write_text("".join(json.dumps({"id": i, "query": q, "answer_ids": [a], "split": "heldout"}) + "\n"
                             for i, (q, a) in enumerate([("sodium", 1), ("potassium", 2), ("galactosyl", 0)])))
    out = tmp_path / "r.json"
    main(["-q", "eval", "--skb", str(toy_dir), "--queries", str(qfile), "--split", "heldout", "--limit", "2",
          "--method", "bm25", "--output-json", str(out)])
    assert json.loads(out.read_text())["n"] == 2


def test_cache_dir_option_wins(toy_dir, tmp_path, cache_dir):
    main(["-q", "--cache-dir", str(tmp_path / "elsewhere"), "eval", "--skb", str(toy_dir), "--method", "bm25"])
    assert (tmp_path / "elsewhere" / "skb").exists() and not cache_dir.exists()


def test_search_prints_ranked_nodes(toy_dir, cache_dir, capsys):
    main(["-q", "search", "sodium channel", "--skb", str(toy_dir), "-k", "2", "--json", "--method", "bm25"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["rank"] for r in rows] == [1, 2] and rows[0]["type"] == "gene"
    main(["-q", "search", "sodium channel", "--skb", str(toy_dir), "-k", "2", "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["rank"] for r in rows] == [1, 2]
    main(["-q", "search", "sodium channel", "--skb", str(toy_dir), "-k", "2", "--json", "--explain"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["node_id"] for r in lines[:2]] == [r["node_id"] for r in rows]
    # auto on the unprepared toy: the three stages on their untuned defaults (no trained reranker: grasp-zs)
    assert lines[2]["method"] == "grasp-zs" and list(lines[2]["stages"]) == ["graph", "mfar", "fused", "reranker", "grasp-zs"]
    assert set(lines[0]["stage_ranks"]) == {"graph", "mfar", "fused", "reranker", "final"}
    assert lines[2]["stages"]["fused"]["mode"] == "static"


@pytest.mark.parametrize(
    "args, message",
    [
        (["eval", "--skb", "{bad}", "--method", "bm25"], "nodes.jsonl:2: field 'type': unknown node type 'drug'"),
        (["eval", "--skb", "{toy}", "--method", "bm25", "--split", "nope"], "no queries selected"),
        (["--set", "encoder.max_length=abc", "info", "--skb", "{toy}"], "config field 'encoder.max_length'"),
        (["--set", "nonsense", "info", "--skb", "{toy}"], "expected KEY=VALUE"),
        (["-q", "search", "  ", "--skb", "{toy}"], "query is empty"),  # the API's query checks, not an empty answer
        (["-q", "search", "sodium", "--skb", "{toy}", "--method", "grasp"], "not prepared for this knowledge base: no trained reranker"),
    ],
)
def test_errors_are_one_line(args, message, toy_dir, tmp_path, cache_dir):
    bad = write_toy(tmp_path / "bad", nodes=[
        {"id": 0, "type": "gene", "name": "A"}, {"id": 1, "type": "drug", "name": "B"}], edges=[])
    args = [a.replace("{bad}", str(bad)).replace("{toy}", str(toy_dir)) for a in args]
    code, out, err = grasp(*args)
    assert code == 2
    assert message in err
    assert err.strip().count("\n") == 0 and "Traceback" not in err


def test_unknown_method_is_a_usage_error(toy_dir):
    code, _, err = grasp("eval", "--skb", str(toy_dir), "--method", "magic")
    assert code == 2 and "Invalid value for '--method'" in err


def test_download_offline_says_what_to_do(tmp_path):
    import os

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    code, _, err = grasp("data", "download", "stark-prime", "--dest", str(tmp_path / "d"), env=env)
    assert code == 2
    assert "could not download stark-prime from the Hugging Face Hub" in err
    assert "--skb" in err and "processed" in err


def test_validate_demo_kb(capsys):
    main(["data", "validate", str(DEMO_SKB)])
    out = capsys.readouterr().out
    assert "ok: SKB('demo-pkg', 21,164 nodes" in out and "62 queries" in out


def test_info(toy_dir, cache_dir, capsys):
    main(["info", "--skb", str(toy_dir)])
    out = capsys.readouterr().out
    assert "toy: 9 nodes, 9 edges" in out and "involved_in" in out


def test_config_cache_dir_beats_the_environment(toy_dir, tmp_path, cache_dir):
    """$GRASP_CACHE_DIR is the default; an explicit `--set cache_dir=...` wins over it."""
    main(["-q", "--set", f"cache_dir={tmp_path / 'configured'}", "eval", "--skb", str(toy_dir), "--method", "bm25"])
    assert (tmp_path / "configured" / "skb").exists() and not cache_dir.exists()


def test_index_builds_what_is_ready_and_says_what_is_missing(toy_dir, cache_dir, capsys):
    main(["index", "--skb", str(toy_dir)])
    out = capsys.readouterr().out
    for m in ("bm25", "dense", "graph", "mfar", "fused", "grasp-zs"):  # untuned parts run on their defaults
        assert f"{m}: ready" in out
    assert "grasp: skipped (no trained reranker: grasp train reranker)" in out
    # every node type's name- and doc-mode vectors exist now, so no anchor builds an index inside a query
    from grasp.skb import read_skb

    built = {p.name.split("-")[0] + "-" + p.name.split("-")[1] for p in cache_dir.rglob("embeddings/*.npy")}
    types = [t.replace("/", "_") for t in read_skb(toy_dir).schema.node_types]
    assert {f"{mode}-{t}" for mode in ("name", "doc") for t in types} <= built


def test_every_command_named_in_a_message_exists():
    """Messages that tell the user what to run (`grasp train reranker`, ...) name real commands and options."""
    import re

    import click

    from grasp.cli import cli

    src = REPO / "src" / "grasp"
    named = set()
    for path in src.rglob("*.py"):
        for m in re.finditer(r"[`(:] ?grasp ((?:[a-z][a-z-]* ?)+(?:--[a-z-]+)?)", path.read_text(encoding="utf-8")):
            named.add(m.group(1).strip())
    assert len(named) >= 10
    for words in sorted(named):
        cmd = cli
        for word in words.split():
            if word.startswith("--"):
                assert any(word in p.opts for p in cmd.params), f"`grasp {words}`: no option {word}"
                break
            if not isinstance(cmd, click.Group):  # a command's argument, e.g. `grasp fetch planner`
                choices = [c for p in cmd.params if isinstance(p, click.Argument) and isinstance(p.type, click.Choice)
                           for c in p.type.choices]
                assert word in choices, f"`grasp {words}`: {cmd.name} takes no argument {word!r}"
                continue
            assert word in cmd.commands, f"`grasp {words}`: no command {word!r}"
            cmd = cmd.commands[word]


def test_every_extra_named_in_a_message_exists():
    """`pip install 'grasp-retrieval[X]'` in a message names an extra that pyproject.toml declares."""
    import re
    import tomllib

    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = {m.group(1) for p in (REPO / "src" / "grasp").rglob("*.py")
             for m in re.finditer(r"grasp-retrieval\[([a-z0-9_-]+)\]", p.read_text(encoding="utf-8"))}
    assert named and named <= extras, named - extras


def test_search_says_what_it_is_doing(toy_dir, cache_dir, capsys):
    """Without -q, each pipeline stage is announced on stderr as it starts (stdout stays the results)."""
    main(["search", "sodium channel", "--skb", str(toy_dir), "-k", "2"])
    captured = capsys.readouterr()
    import re

    for stage in ("mfar: scoring every field", "fusing: fusing the graph and mfar rankings (static RRF)",
                  "reranking: reranking the top 30 with the bi-encoder reranker"):  # auto: grasp-zs, untuned
        assert re.search(r"… +\d+\.\d s " + re.escape(stage), captured.err), stage  # with the seconds since the start
    assert "… plan (" not in captured.err and "planning" not in captured.err  # no model, no cached plan: none shown
    assert "…" not in captured.out
    main(["-q", "search", "sodium channel", "--skb", str(toy_dir), "-k", "2"])
    assert "…" not in capsys.readouterr().err


def grasp_bytes(*args: bytes | str, env=None):
    """The CLI with raw bytes on its command line (a terminal can pass bytes that are not UTF-8)."""
    argv = [a if isinstance(a, bytes) else a.encode() for a in args]
    p = subprocess.run([sys.executable.encode(), b"-m", b"grasp.cli", *argv], capture_output=True, env=env, timeout=600)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


@pytest.mark.parametrize("command", [b"search", b"plan"])
def test_a_query_that_is_not_utf8_is_refused_before_anything_loads(command, toy_dir, cache_dir):
    code, _, err = grasp_bytes(b"-q", command, b"yaml \xff parser", b"--skb", str(toy_dir).encode())
    assert code == 2 and err.strip() == "error: query is not valid UTF-8 text (undecodable bytes or a lone surrogate)"
    assert not cache_dir.exists()  # refused before any index was opened


def test_quiet_search_of_an_empty_query_prints_one_line(toy_dir, cache_dir):
    """`-q` silences the libraries' loading bars and warnings too; the query is checked before any model loads."""
    code, out, err = grasp("-q", "search", "", "--skb", str(toy_dir))
    assert (code, out, err) == (2, "", "error: query is empty\n")


def test_cache_dir_naming_a_file(toy_dir, tmp_path):
    import os

    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    code, _, err = grasp("-q", "info", "--skb", str(toy_dir), env={**os.environ, "GRASP_CACHE_DIR": str(a_file)})
    assert code == 2 and err.strip() == f"error: {a_file} ($GRASP_CACHE_DIR) is a file, not a folder: name a folder " \
                                         "for the index cache"


def test_plans_import_of_a_file_that_is_not_utf8(toy_dir, tmp_path, cache_dir):
    plans = tmp_path / "plans.jsonl"
    plans.write_bytes(b'{"query": "sodium \xff", "plan": {}}\n')
    code, _, err = grasp("-q", "plans", "import", str(plans), "--skb", str(toy_dir))
    assert code == 2 and err.strip() == f"error: {plans}:1: not UTF-8 text (byte 0xff at column 19); save the file as UTF-8"


@pytest.mark.parametrize("args, message", [
    (["plan", "sodium", "-k", "1000000000"], "1000000000 is not in the range 1<=x<=100"),
    (["eval", "--method", "bm25", "-k", "1000000000"], "1000000000 is not in the range 1<=x<=1000"),
    (["eval", "--method", "bm25", "--queries", "{nul}"], "queries.jsonl:1: field 'query': query contains a NUL"),
    (["eval", "--method", "bm25", "--queries", "{long}"], "field 'query': query is 10000 characters long"),
])
def test_eval_and_plan_refuse_what_search_refuses(args, message, toy_dir, tmp_path, cache_dir):
    (tmp_path / "nul").mkdir()
    (tmp_path / "nul" / "queries.jsonl").write_text(json.dumps({"id": 1, "query": "a\u0000b", "answer_ids": [0]}) + "\n")
    (tmp_path / "long.jsonl").write_text(json.dumps({"id": 1, "query": "x" * 10000, "answer_ids": [0]}) + "\n")
    args = [a.replace("{nul}", str(tmp_path / "nul" / "queries.jsonl")).replace("{long}", str(tmp_path / "long.jsonl"))
            for a in args]
    code, _, err = grasp("-q", *args[:1], *args[1:], "--skb", str(toy_dir))
    assert code == 2 and message in err and "Traceback" not in err


def test_serve_on_a_taken_port_fails_before_claiming_to_serve(toy_dir, cache_dir):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = grasp("-q", "serve", "--skb", str(toy_dir), "--port", str(port))
    assert code == 2 and "serving" not in out
    assert err.strip() == f"error: cannot listen on 127.0.0.1:{port} (Address already in use): another process holds " \
                          "the port; pick another with --port"
    assert not cache_dir.exists()  # nothing loaded
