"""The REST service and the web inspector over a :class:`~grasp.api.Searcher`."""

from grasp.service.app import create_app
from grasp.service.listen import listen

__all__ = ["create_app", "listen"]
