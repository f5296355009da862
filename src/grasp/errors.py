"""Errors meant for users: each names the place (file, line, field) and the problem."""

from __future__ import annotations

from pathlib import Path


class GraspError(Exception):
    """Base class for every error the CLI reports as one line instead of a traceback."""


class FormatError(GraspError):
    """A data file (SKB, queries, run) does not follow its format.

    The message reads ``FILE:LINE: field 'FIELD': PROBLEM`` with the parts that are known.
    """

    def __init__(
        self,
        problem: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.problem = problem
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        place = ""
        if self.file is not None:
            place = self.file
            if self.line is not None:
                place += f":{self.line}"
            place += ": "
        if self.field is not None:
            place += f"field '{self.field}': "
        return place + self.problem


class IndexCorruptError(GraspError):
    """An index or cache file on disk is missing, truncated or from another build."""


class OfflineError(GraspError):
    """Something needs the network (e.g. the Hugging Face Hub), which is not reachable."""


class ConfigError(GraspError):
    """A configuration value or command-line option is invalid."""


def first_error(e) -> tuple[str, str]:
    """(dotted location, message) of a pydantic ValidationError's first error."""
    err = e.errors()[0]
    return ".".join(str(p) for p in err["loc"]), str(err["msg"]).removeprefix("Value error, ")


class InputError(GraspError):
    """A query or request parameter is invalid (empty, too long, binary, k out of range)."""


class ArtifactMismatchError(GraspError):
    """A trained artifact was made for another SKB or configuration than the one loading it."""
