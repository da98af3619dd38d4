"""Every exception and warning tracetochain raises, in one place.

All errors derive from :class:`TraceToChainError` *and* a matching builtin (``ValueError``, ``KeyError`` …), so
``except ValueError`` keeps working for users who do not know our hierarchy. The CLI turns any
:class:`TraceToChainError` into one line on stderr and exit code 2.
"""

from __future__ import annotations


class TraceToChainError(Exception):
    """Base class of every error raised on purpose by tracetochain."""


class TraceValidationError(TraceToChainError, ValueError):
    """A trace record is malformed. The message names the source, the line or row, the field and the fix."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        row: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.source = source
        self.line = line
        self.row = row
        self.field = field
        self.hint = hint
        where = source or ""
        if line is not None:
            where += f":{line}"
        if row is not None:
            where += f"{', ' if where else ''}row {row}"
        parts = [where] if where else []
        if field is not None:
            parts.append(f"field '{field}'")
        text = ": ".join([*parts, message])
        if hint:
            text += f" — {hint}"
        self._message = message
        super().__init__(text)

    def __reduce__(self) -> tuple[object, ...]:
        # Errors raised in a worker process travel back pickled; keep the fields, not only the text.
        return (_rebuild_validation_error, (type(self), self._message, self.source, self.line, self.row, self.field,
                                            self.hint))


def _rebuild_validation_error(cls: type[TraceValidationError], message: str, source: str | None, line: int | None,
                              row: int | None, field: str | None, hint: str | None) -> TraceValidationError:
    return cls(message, source=source, line=line, row=row, field=field, hint=hint)


class EmptyTraceSetError(TraceToChainError, ValueError):
    """There is nothing to fit: no traces at all, or none left after excluding invalid/skipped ones."""


class ChainValidationError(TraceToChainError, ValueError):
    """A chain's matrices are not a valid absorbing chain (shape, negative entry, row sum ≠ 1)."""


class NonAbsorbingError(ChainValidationError):
    """Some transient states can never reach success or failure (a closed loop), so I − Q is singular.

    ``states`` holds the offending state names.
    """

    def __init__(self, message: str, states: tuple[str, ...]) -> None:
        self.states = states
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.args[0], self.states))


class UndefinedMetricError(TraceToChainError, ValueError):
    """A quantity is mathematically undefined for this chain, e.g. E[steps | success] when R∞ = 0."""


class NotFittedError(TraceToChainError, AttributeError):
    """``fetch_model()`` was called before ``fit()``."""


class SchemaVersionError(TraceToChainError, ValueError):
    """A saved document has a schema version this release cannot read."""


class OutputFileError(TraceToChainError, OSError):
    """An output file cannot or must not be written: it is an input of the command, a symbolic link, a folder, an
    existing file without ``--force`` / ``overwrite=True``, or the operating system refused (the reason is given).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.args[0],))


class ResourceLimitError(TraceToChainError, ValueError):
    """A run would exceed a resource limit (states, horizon, draws, memory); the message says how to proceed."""


class EngineError(TraceToChainError, ValueError):
    """An engine cannot be used: an unknown name, or a Dask scheduler that cannot be reached."""


class TraceToChainWarning(UserWarning):
    """Base class of tracetochain's warnings."""


class IllConditionedWarning(TraceToChainWarning):
    """ρ(Q) is so close to 1 that solves lose accuracy; results carry a residual check."""
