"""FastAPI app: ``POST /search``, ``GET /health``, ``GET /schema``, the inspector page at ``/``,
and OpenAPI docs at ``/docs``.

Requests are validated at the edge (query length, k range) and answered with a 4xx that says
what is wrong. Nothing a request sends can change the graph or the indexes: the graph stage
runs one parameterised, read-only Cypher query per plan, and the searcher is used from one worker thread
(its models and database connection are not thread-safe), so concurrent searches queue. Their plans do not:
each request is planned first on a pool of planning threads, as many as the planner serves at once, so new
questions arriving together are decoded together (the torch engine's batch) and each search then finds its
plan cached.
"""

from __future__ import annotations

import asyncio
import json
import queue
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from grasp import __version__, methods
from grasp.api import Searcher
from grasp.errors import GraspError, InputError
from grasp.inputs import MAX_K, MAX_QUERY_CHARS, query_problem
from grasp.plan.build import client_concurrency
from grasp.progress import listening

STATIC = Path(__file__).parent / "static"


class SearchRequest(BaseModel):
    """Strict: a field of another JSON type (``"k": "5"``, ``"k": true``, ``"explain": "yes"``) and a field the API
    does not know are refused (422 naming them), never coerced or ignored."""

    model_config = ConfigDict(extra="forbid", strict=True)

    query: str = Field(..., min_length=1, max_length=MAX_QUERY_CHARS, description="the question, in any language")
    k: int = Field(10, ge=1, le=MAX_K, description="how many results")
    explain: bool = Field(False, description="include the plan, bindings, Cypher, fusion weights, stage ranks, timings")

    @field_validator("query")
    @classmethod
    def _answerable(cls, text: str) -> str:
        if (problem := query_problem(text)) is not None:
            raise ValueError(problem)
        return text


class HitOut(BaseModel):
    node_id: int
    name: str
    type: str
    score: float
    rank: int
    stage_ranks: dict[str, int | None]
    fields: dict[str, str]


class SearchResponse(BaseModel):
    query: str
    method: str
    hits: list[HitOut]
    explain: dict[str, Any] | None = None


def _readable(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


class BodyLimit:
    """ASGI middleware: a request body larger than ``limit`` bytes gets 413 before it is read whole (by its declared
    length, or as a chunked body passes the limit)."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await JSONResponse(status_code=413, content={"detail": self.detail})(scope, receive, send)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(status_code=413, detail=self.detail)
            return message

        await self.app(scope, counted, send)

    @property
    def detail(self) -> str:
        return f"request body over {self.limit} bytes (service.max_body_bytes)"


def create_app(searcher: Searcher) -> FastAPI:
    app = FastAPI(title="GRASP retrieval", version=__version__,
                  description="Graph-planned, fused and reranked retrieval over a semi-structured knowledge base.")
    app.add_middleware(BodyLimit, limit=searcher.workspace.config.service.max_body_bytes)
    # every search runs on one thread: the searcher's models and database connection are not thread-safe, so
    # requests queue here, and one thread's allocations keep the process's memory from spreading over per-thread
    # malloc arenas (measured in bench/service_soak.py)
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grasp-search")
    # plans are made before a request's turn on the worker, many at once (Searcher.plan_ahead)
    planning = ThreadPoolExecutor(max_workers=client_concurrency(searcher.workspace.config.planner),
                                  thread_name_prefix="grasp-plan")
    started = time.time()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": _readable(exc)})

    @app.exception_handler(InputError)
    async def _bad_input(request: Request, exc: InputError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": str(exc)})

    @app.exception_handler(GraspError)
    async def _failed(request: Request, exc: GraspError) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc)})

    @app.post("/search", response_model=SearchResponse, response_model_exclude_none=True)
    async def search(req: SearchRequest) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(planning, searcher.plan_ahead, req.query)
        result = await loop.run_in_executor(worker, lambda: searcher.search(req.query, req.k, explain=req.explain))
        out = result.to_dict()
        if not req.explain:
            out["explain"] = None
        return out

    @app.post("/search/stream")
    def search_stream(req: SearchRequest) -> StreamingResponse:
        """The same search, as NDJSON lines: one ``{"stage", "message", "elapsed_s"}`` per pipeline stage as it starts
        (planning, linking, executing, rescoring, mfar, fusing, reranking), ``{"plan", "status", "cached", "seconds"}``
        as soon as the plan exists (methods with a graph stage), then ``{"result": ...}`` or ``{"error", "status"}``."""
        events: queue.Queue = queue.Queue()
        t0 = time.perf_counter()

        def stage(name: str, message: str) -> None:
            events.put({"stage": name, "message": message, "elapsed_s": round(time.perf_counter() - t0, 3)})

        def plan() -> None:
            try:
                with listening(stage):
                    outcome = searcher.plan_ahead(req.query)
                if outcome is not None:  # shown while the other stages run
                    events.put({"plan": outcome.check.plan.dump(), "status": outcome.check.status,
                                "cached": outcome.cached, "seconds": round(outcome.seconds, 3),
                                "elapsed_s": round(time.perf_counter() - t0, 3)})
            finally:
                worker.submit(work)

        def work() -> None:
            try:
                with listening(stage):
                    result = searcher.search(req.query, req.k, explain=req.explain)
                out = result.to_dict()
                if not req.explain:
                    out["explain"] = None
                events.put({"result": out})
            except InputError as e:
                events.put({"error": str(e), "status": 422})
            except GraspError as e:
                events.put({"error": str(e), "status": 503})
            finally:
                events.put(None)

        planning.submit(plan)
        lines = iter(events.get, None)
        return StreamingResponse((json.dumps(item, default=str) + "\n" for item in lines),
                                 media_type="application/x-ndjson")

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__, "kb": searcher.skb.schema.name, "method": searcher.method,
                "nodes": len(searcher.skb.names), "uptime_s": round(time.time() - started, 1),
                "methods": methods.readiness(searcher.workspace), "untuned": methods.untuned(searcher.workspace),
                "notes": searcher.notes}

    @app.get("/schema")
    def schema() -> dict[str, Any]:
        return searcher.schema()

    @app.get("/", include_in_schema=False)
    def inspector() -> FileResponse:
        return FileResponse(STATIC / "inspector.html", media_type="text/html")

    return app
