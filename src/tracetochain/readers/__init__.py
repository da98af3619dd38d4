"""Source formats → canonical :class:`~tracetochain.TraceTable`. Readers are the only code that knows a format."""

from tracetochain.readers._registry import (
    BUILTIN_READERS,
    Reader,
    available_readers,
    detect_format,
    get_reader,
    read_traces,
    register_reader,
)

__all__ = ["BUILTIN_READERS", "Reader", "available_readers", "detect_format", "get_reader", "read_traces",
           "register_reader"]
