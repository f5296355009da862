"""Helper process for the server-backend tests: an ArcadeDB server with its Bolt plugin on loopback.

    python tests/bolt_server.py ROOT BOLT_PORT HTTP_PORT PASSWORD DB[,DB...]

Prints READY once the databases exist, then serves until its standard input closes. The JVM
lives in this process only, so its shutdown can never disturb the test runner.
"""

from __future__ import annotations

import sys

import arcadedb_embedded as arcadedb


def main() -> None:
    root, bolt, http, password, dbs = sys.argv[1:6]
    server = arcadedb.create_server(root, root_password=password,
                                    config={"http_port": int(http), "host": "127.0.0.1", "bolt_port": int(bolt),
                                            "server_plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin"})
    server.start()
    for db in dbs.split(","):
        server.create_database(db)
    print("READY", flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
