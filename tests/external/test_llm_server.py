"""The OpenAI-compatible planner client against a real server: llama.cpp's HTTP server (embedded in
xllamacpp) on loopback with the offline planner model. It accepts strict JSON schemas (the reply obeys
the schema), and it refuses a schema it cannot compile, which the client says once and then plans
without a schema."""

from __future__ import annotations

import json

import pytest

from grasp.config import PlannerConfig
from grasp.plan.build import local_planner_path
from grasp.plan.llm import OpenAIChatClient
from grasp.storage import cache_root
from tests.conftest import free_port, skip_unless_ci

pytestmark = pytest.mark.slow

ANSWER = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
          "required": ["answer"], "additionalProperties": False}
UNCOMPILABLE = {"type": "object", "properties": {"answer": {"$ref": "#/definitions/missing"}}}  # llama.cpp: 400
ASK = [{"role": "user", "content": "Is the sky blue on a clear day? Reply in JSON with one field, answer."}]


@pytest.fixture(scope="module")
def llama_server():
    model = local_planner_path(PlannerConfig(), cache_root())
    if not model.exists():
        skip_unless_ci(f"the planner model is not on this machine ({model}): grasp fetch planner")
    import xllamacpp as xl

    port = free_port()
    p = xl.CommonParams()
    p.model.path = str(model)
    p.port = port
    p.hostnames = ["127.0.0.1"]  # loopback only
    p.n_ctx = 1024
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = 2
    p.sampling.temp = 0.0
    p.warmup = False
    p.verbosity = -1
    server = xl.Server(p)
    assert server.listening_address == f"http://127.0.0.1:{port}"
    yield f"{server.listening_address}/v1"


def test_a_real_server_follows_a_strict_schema(llama_server):
    client = OpenAIChatClient(llama_server, "planner", timeout_s=120, retries=1)
    reply = json.loads(client.chat(ASK, json_schema=ANSWER, max_tokens=16))
    assert set(reply) == {"answer"} and reply["answer"] in ("yes", "no")
    assert client.structured


def test_a_real_server_refusing_the_schema_is_named_once(llama_server):
    client = OpenAIChatClient(llama_server, "planner", timeout_s=120, retries=2)
    with pytest.warns(UserWarning, match="refuses JSON-schema structured output") as caught:
        first = client.chat(ASK, json_schema=UNCOMPILABLE, max_tokens=16)
    said = [w for w in caught if "structured output" in str(w.message)]
    assert len(said) == 1 and "JSON schema error" in str(said[0].message)
    assert not client.structured and first.strip()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the client no longer asks, so nothing more is said
        assert client.chat(ASK, json_schema=UNCOMPILABLE, max_tokens=16).strip()
