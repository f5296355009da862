"""The service's listening socket, bound before anything loads: a taken port is one line, not a traceback after
the models have loaded and "serving" has been printed."""

from __future__ import annotations

import socket

from grasp.errors import ConfigError


def listen(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket on (host, port), or :class:`ConfigError` saying why there is none."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ConfigError(f"--host {host!r}: not an address this machine can listen on ({e.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({e.strerror}): another process holds the port; "
                          "pick another with --port") from None
    sock.set_inheritable(True)
    return sock
