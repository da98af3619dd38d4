"""Source formats → canonical :class:`~tracetochain.TraceTable`. Readers are the only code that knows a format."""

from tracetochain.readers._common import Refusal
from tracetochain.readers._registry import (
    BUILTIN_READERS,
    Reader,
    SniffAnswer,
    available_readers,
    detect_format,
    get_reader,
    read_traces,
    register_reader,
    sniff_all,
)

__all__ = ["BUILTIN_READERS", "Reader", "Refusal", "SniffAnswer", "available_readers", "detect_format",
           "get_reader", "read_traces", "register_reader", "sniff_all"]
