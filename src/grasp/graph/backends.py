"""Graph database backends behind one small interface: load an SKB, run a compiled plan.

- :class:`KuzuBackend` (default): Kùzu embedded in-process, persisted beside the other indexes,
  built into a temporary folder and renamed when complete, opened read-only for queries.
- :class:`Neo4jBackend`: a Neo4j 5 (or Bolt-compatible) server through the official driver;
  queries run in read transactions.
Nodes are stored one table/label per node type with properties ``id`` (the SKB node id) and
``name``; relations one table/type per relation name, stored in the schema's direction.
"""

from __future__ import annotations

import atexit
import csv
import json
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np

from grasp.errors import ConfigError, GraspError, IndexCorruptError
from grasp.graph.compiler import CompiledQuery, CypherNames, assert_read_only
from grasp.graph.engine import CypherBackend
from grasp.skb.graph import SKB
from grasp.storage import atomic_dir, build_lock, checksum, require_intact, write_json_if_writable


def _string_literal(path: Path) -> str:
    """A file path as a Cypher string literal (backslashes and quotes escaped): cache paths may hold ``'``."""
    return "'" + path.as_posix().replace("\\", "\\\\").replace("'", "\\'") + "'"


def _type_signature(value) -> str:
    """A parameter's type as a prepared statement binds it (a list: by its first item's type too)."""
    if isinstance(value, (list, tuple)):
        return f"list[{type(value[0]).__name__ if value else ''}]"
    return type(value).__name__


def _rows_to_arrays(rows) -> tuple[np.ndarray, np.ndarray]:
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    ids, scores = zip(*rows, strict=True)
    return _columns_to_arrays(ids, scores)


def _columns_to_arrays(ids, scores) -> tuple[np.ndarray, np.ndarray]:
    """(node ids, scores) of a result's two columns, one row per node (its best score), by id."""
    ids, scores = np.asarray(ids, dtype=np.int64), np.asarray(scores, dtype=np.float64)
    # one row per node: a database holding an edge twice (an interrupted load run again) must not rank a node twice
    order = np.lexsort((-scores, ids))
    ids, scores = ids[order], scores[order]
    first = np.ones(ids.size, dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    return ids[first], scores[first]


def _fetch_columns(result) -> tuple[np.ndarray, np.ndarray]:
    """A Kùzu/LadybugDB result's (id, score) columns. Through the engine's columnar export when pandas is
    installed (far faster than Python's row loop on the hundreds of thousands of rows one hub anchor can
    return: bench/search_kernels.py), else row by row."""
    try:
        import pandas  # noqa: F401 - get_as_df needs it
    except ImportError:
        rows = []
        while result.has_next():
            rows.append(result.get_next())
        return _rows_to_arrays(rows)
    frame = result.get_as_df()
    if frame.shape[1] != 2:
        raise GraspError(f"the compiled query returned {frame.shape[1]} columns, expected (id, score)")
    return _columns_to_arrays(frame.iloc[:, 0].to_numpy(), frame.iloc[:, 1].to_numpy())


def _import_engine(module: str, other: str):
    """Import the embedded engine ``module`` (kuzu or ladybug), after xllamacpp when that is installed:
    xllamacpp's extension aborts the process (std::bad_alloc in its static initialisers) when it is loaded
    after kuzu's, which would kill a process that opens the graph first and then plans a new query with
    the local LLM. Kùzu and its fork LadybugDB register the same native types: one process holds one."""
    import contextlib
    import importlib
    import sys

    if other in sys.modules:
        raise ConfigError(f"graph.engine {module!r}: this process has already loaded {other!r}, and the two "
                          "engines (Kùzu and its fork LadybugDB) cannot share a process; use one per process")
    if module not in sys.modules:  # once it is loaded, loading xllamacpp would abort: leave it to the planner
        with contextlib.suppress(ImportError):
            import xllamacpp  # noqa: F401
    return importlib.import_module(module)


class KuzuBackend(CypherBackend):
    """Kùzu embedded (the default engine)."""

    name = "kuzu"
    TITLE = "Kùzu"
    MODULE, OTHER, PIN = "kuzu", "ladybug", "kuzu==0.11.3"
    FORMAT = 1
    # the address space each open database reserves (Kùzu's default, 8 TiB, lets one process hold about 15 open
    # databases before mmap fails); 1 TiB is still far above any STaRK graph's database
    MAX_DB_SIZE = 1 << 40
    # prepared statements kept per Cypher text: Kùzu 0.11 keeps memory behind every statement it prepares (one
    # ``execute(text, params)`` prepares one), so a service preparing each query anew grows without bound
    # (bench/service_soak.py); compiled plans differ only in their parameters, so a few hundred texts cover them
    MAX_STATEMENTS = 512

    def __init__(self, skb: SKB, root: Path, *, buffer_pool_mb: int = 1024, progress: bool = True) -> None:
        try:
            kuzu = _import_engine(self.MODULE, self.OTHER)
        except ImportError:
            raise ConfigError(f"the {self.name} graph backend needs {self.MODULE}: pip install '{self.PIN}'") from None
        self.names = CypherNames(skb.schema)
        self.path = Path(root) / f"{self.name}-v{self.FORMAT}"
        with build_lock(self.path):
            if not (self.path / "complete.json").exists():
                self._build(skb, kuzu, buffer_pool_mb)
        meta = self._check_intact()
        try:
            self._db = kuzu.Database(str(self.path / "db"), read_only=True, buffer_pool_size=buffer_pool_mb << 20,
                                     max_db_size=self.MAX_DB_SIZE)
            self._conn = kuzu.Connection(self._db)
            self._statements: OrderedDict[tuple, object] = OrderedDict()
            nodes = self._conn.execute("MATCH (n) RETURN count(*)").get_next()[0]
        except (RuntimeError, MemoryError) as e:
            raise IndexCorruptError(f"{self.path}: cannot open the {self.TITLE} database ({e}); delete it (rm -r "
                                    f"'{self.path}') and the next run rebuilds it") from None
        if nodes != skb.num_nodes:
            raise IndexCorruptError(f"{self.path}: the {self.TITLE} database holds {nodes} nodes, the SKB {skb.num_nodes}; "
                                    f"delete it (rm -r '{self.path}') and the next run rebuilds it")
        if "db_sha256" not in meta:  # built before its files' checksum was recorded, and sound: recorded now
            write_json_if_writable(self.path / "complete.json", {**meta, "db_sha256": checksum(self.path / "db")})
        atexit.register(self.close)

    def _build(self, skb: SKB, kuzu, buffer_pool_mb: int) -> None:
        names = self.names
        with atomic_dir(self.path) as tmp:
            db = kuzu.Database(str(tmp / "db"), buffer_pool_size=buffer_pool_mb << 20, max_db_size=self.MAX_DB_SIZE)
            conn = kuzu.Connection(db)
            csv_dir = tmp / "csv"
            csv_dir.mkdir()
            for t, ident in names.label.items():
                conn.execute(f"CREATE NODE TABLE {ident}(id INT64, name STRING, PRIMARY KEY (id))")
                ids = skb.nodes_of_type(t)
                path = csv_dir / f"n_{ident}.csv"
                with open(path, "w", newline="", encoding="utf-8") as f:
                    w = csv.writer(f)
                    for i in ids.tolist():
                        w.writerow([i, skb.names[i]])
                if ids.size:  # RFC 4180 quoting; names may hold newlines, which Kùzu reads only serially
                    conn.execute(f"COPY {ident} FROM {_string_literal(path)} (header=false, parallel=false, escape='\"')")
            for rel_name, ident in names.rel.items():
                pairs = [r for r in skb.schema.relations if r.name == rel_name]
                spec = ", ".join(f"FROM {names.label[r.source]} TO {names.label[r.target]}" for r in pairs)
                conn.execute(f"CREATE REL TABLE {ident}({spec})")
                for ri, r in enumerate(skb.schema.relations):
                    if r.name != rel_name:
                        continue
                    sel = skb.edge_rel == ri
                    if not sel.any():
                        continue
                    path = csv_dir / f"r_{ident}_{ri}.csv"
                    np.savetxt(path, np.stack([skb.edge_src[sel], skb.edge_dst[sel]], axis=1), fmt="%d", delimiter=",")
                    opts = "header=false" if len(pairs) == 1 else (
                        f"header=false, from='{names.label[r.source]}', to='{names.label[r.target]}'")
                    conn.execute(f"COPY {ident} FROM {_string_literal(path)} ({opts})")
            conn.close()
            db.close()
            load_sha256 = checksum(csv_dir)  # what was loaded (the database files themselves are not byte-stable)
            for p in csv_dir.iterdir():
                p.unlink()
            csv_dir.rmdir()
            (tmp / "complete.json").write_text(json.dumps({"format": self.FORMAT, "skb": skb.fingerprint,
                                                           "labels": names.label, "relations": names.rel,
                                                           "load_sha256": load_sha256,
                                                           "db_sha256": checksum(tmp / "db")}))

    def _check_intact(self) -> dict:
        """The build record; refuses a database whose files changed since the build."""
        record = self.path / "complete.json"
        try:
            meta = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise IndexCorruptError(f"{record}: unreadable ({e}); delete {self.path} to rebuild") from None
        require_intact(self.path / "db", meta.get("db_sha256"), f"{self.TITLE} database")
        return meta

    def _prepared(self, query: CompiledQuery):
        """The statement prepared for the query's text and parameter types, prepared once and reused (the least
        recently used dropped past :attr:`MAX_STATEMENTS`). The parameters' types decide the statement's binding."""
        key = (query.cypher, *sorted((name, _type_signature(value)) for name, value in query.params.items()))
        statement = self._statements.get(key)
        if statement is not None:
            self._statements.move_to_end(key)
            return statement
        with warnings.catch_warnings():  # Kùzu 0.11 deprecates prepare(); execute(text) would prepare anew each time
            warnings.simplefilter("ignore", DeprecationWarning)
            statement = self._conn.prepare(query.cypher, query.params)
        if not statement.is_success():
            raise RuntimeError(statement.get_error_message())
        self._statements[key] = statement
        if len(self._statements) > self.MAX_STATEMENTS:
            self._statements.popitem(last=False)
        return statement

    def run(self, query: CompiledQuery) -> tuple[np.ndarray, np.ndarray]:
        assert_read_only(query.cypher)
        try:
            result = self._conn.execute(self._prepared(query), query.params)
        except RuntimeError as e:
            raise GraspError(f"{self.TITLE} rejected the compiled query: {e}") from None
        try:
            return _fetch_columns(result)
        finally:
            result.close()

    def close(self) -> None:
        """Release the database; also run at interpreter exit (Kùzu objects torn down in arbitrary
        order at shutdown can abort the process)."""
        if self._conn is not None:
            self._statements.clear()
            self._conn.close()
            self._db.close()
            self._conn = self._db = None


class LadybugBackend(KuzuBackend):
    """LadybugDB embedded: the maintained fork of Kùzu (archived upstream), the same API and Cypher dialect; its
    database folder is its own (``ladybug-v1``). Pinned: pre-1.0, and its extensions download at run time."""

    name = "ladybug"
    TITLE = "LadybugDB"
    MODULE, OTHER, PIN = "ladybug", "kuzu", "ladybug==0.22.0"


class Neo4jBackend(CypherBackend):
    """A Neo4j 5 dialect server over Bolt (Neo4j, or ArcadeDB's Bolt plugin in tests)."""

    name = "neo4j"

    def __init__(self, skb: SKB, uri: str, *, user: str = "neo4j", password: str = "", database: str | None = None,
                 load: bool = True, batch: int = 5000) -> None:
        try:
            import neo4j
        except ImportError:
            raise ConfigError("the neo4j graph backend needs the driver: pip install 'grasp-retrieval[neo4j]'") from None
        self.names = CypherNames(skb.schema)
        self.database = database
        self._driver = neo4j.GraphDatabase.driver(uri, auth=(user, password))
        try:
            self._driver.verify_connectivity()
        except Exception as e:  # the driver raises several types for an unreachable server
            raise GraspError(f"cannot reach the graph server at {uri}: {e}") from None
        if load and not self._loaded(skb):
            self._load(skb, batch)

    def _session(self):
        return self._driver.session(database=self.database) if self.database else self._driver.session()

    def _markers(self) -> tuple[str | None, str | None]:
        """(fingerprint of the complete load, fingerprint of a load begun), each None when absent."""
        with self._session() as s:
            done = s.run("MATCH (m:GraspMeta) RETURN m.fingerprint AS f").single()
            begun = s.run("MATCH (m:GraspLoading) RETURN m.fingerprint AS f").single()
        return (done["f"] if done else None), (begun["f"] if begun else None)

    def _loaded(self, skb: SKB) -> bool:
        """Whether this SKB's graph is completely loaded. A database holding another SKB's graph, or nodes
        grasp did not load, is refused: loading into it would mix two graphs."""
        done, begun = self._markers()
        where = f"the graph database{f' {self.database!r}' if self.database else ''}"
        if done not in (None, skb.fingerprint) or begun not in (None, skb.fingerprint):
            raise GraspError(f"{where} holds another SKB's graph (fingerprint {done or begun}, this SKB is "
                             f"{skb.fingerprint}): point graph.database at an empty database, or clear this one")
        if done is None and begun is None and self._count_nodes() > 0:
            raise GraspError(f"{where} holds nodes that grasp did not load: point graph.database at an empty "
                             "database, or clear this one")
        return done is not None

    def _count_nodes(self) -> int:
        with self._session() as s:
            return sum(s.run(f"MATCH (n:{ident}) RETURN count(n) AS c").single()["c"] for ident in self.names.label.values())

    def _load(self, skb: SKB, batch: int) -> None:
        """Load the SKB. A marker says a load has begun, another that it is complete (written last); a load
        that was interrupted (begun, not complete) is cleared and run again, so each node and edge is there once."""
        names = self.names
        with self._session() as s:
            if self._markers()[1] is not None:  # what an interrupted load of this SKB left
                for ident in names.label.values():
                    s.run(f"MATCH (n:{ident}) DETACH DELETE n").consume()
            else:
                s.run("CREATE (m:GraspLoading {fingerprint: $f})", f=skb.fingerprint).consume()
            for t, ident in names.label.items():
                ids = skb.nodes_of_type(t).tolist()
                for lo in range(0, len(ids), batch):
                    rows = [{"id": i, "name": skb.names[i]} for i in ids[lo : lo + batch]]
                    s.run(f"UNWIND $rows AS r CREATE (n:{ident} {{id: r.id, name: r.name}})", rows=rows).consume()
                try:
                    s.run(f"CREATE INDEX FOR (n:{ident}) ON (n.id)").consume()
                except Exception:  # an existing index, or a server with another syntax: lookups still work
                    pass
            for ri, r in enumerate(skb.schema.relations):
                sel = np.flatnonzero(skb.edge_rel == ri)
                src_l, dst_l, rel = names.label[r.source], names.label[r.target], names.rel[r.name]
                for lo in range(0, sel.size, batch):
                    part = sel[lo : lo + batch]
                    rows = [{"s": int(a), "d": int(b)} for a, b in zip(skb.edge_src[part], skb.edge_dst[part], strict=True)]
                    s.run(f"UNWIND $rows AS r MATCH (a:{src_l} {{id: r.s}}) MATCH (b:{dst_l} {{id: r.d}}) "
                          f"CREATE (a)-[:{rel}]->(b)", rows=rows).consume()
            s.run("CREATE (m:GraspMeta {fingerprint: $f})", f=skb.fingerprint).consume()
            s.run("MATCH (m:GraspLoading) DELETE m").consume()

    def run(self, query: CompiledQuery) -> tuple[np.ndarray, np.ndarray]:
        assert_read_only(query.cypher)

        def work(tx):
            return [(rec["id"], rec["score"]) for rec in tx.run(query.cypher, query.params)]

        with self._session() as s:
            try:
                rows = s.execute_read(work)
            except Exception as e:
                raise GraspError(f"the graph server rejected the compiled query: {e}") from None
        return _rows_to_arrays(rows)

    def close(self) -> None:
        self._driver.close()
