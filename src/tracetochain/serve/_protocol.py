"""Read deadlines for uvicorn's HTTP/1.1 protocol: a slow-loris client cannot hold a connection open (N25).

uvicorn bounds idle keep-alive connections (``timeout_keep_alive``) and the size of a request head
(``h11_max_incomplete_event_size``, 16 KiB), but not the *time* a client takes to send it: the keep-alive timer is
cancelled by the first byte received, so a client sending one header byte every few seconds holds its connection
(and a slot of ``limit_concurrency``) for ever. Nor is the time to send the body bounded.

:func:`deadline_protocol` returns uvicorn's own h11 protocol class (``uvicorn.Config(http=...)``, its public
extension point) with two deadlines:

* **head**: the request line and headers must be complete within ``header_timeout`` seconds of the connection
  being opened, or of the end of the previous response on a keep-alive connection; else the connection is
  answered ``408 Request Timeout`` and closed;
* **body**: the whole request (head and body) must be received within ``body_timeout`` seconds of the same
  start; else the connection is closed (the handler sees a disconnect, nothing is acknowledged, so an exporter
  retries the batch).

A fresh connection that sends nothing is closed at the head deadline too (uvicorn arms its keep-alive timer only
after a first response).

Each expired deadline is counted through ``on_timeout(kind)`` (``rejected_header_timeout`` /
``rejected_body_timeout`` on ``/metrics``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

_408 = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        b"content-length: 44\r\n\r\nthe request was not sent within the deadline")


def deadline_protocol(header_timeout: float, body_timeout: float,
                      on_timeout: Callable[[str], None] | None = None) -> type[asyncio.Protocol]:
    """uvicorn's ``H11Protocol`` with a head deadline and a whole-request deadline (seconds; see the module)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    if not (header_timeout > 0 and body_timeout >= header_timeout):
        raise ValueError("header_timeout must be > 0 and body_timeout at least header_timeout "
                         f"(got {header_timeout!r}, {body_timeout!r})")

    class DeadlineH11Protocol(H11Protocol):  # type: ignore[misc]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._deadline: asyncio.TimerHandle | None = None
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(header_timeout, self._head_expired)

        def _disarm(self) -> None:
            handle = getattr(self, "_deadline", None)
            if handle is not None:
                handle.cancel()
                self._deadline = None

        def _waiting_for_head(self) -> bool:
            return self.conn.their_state in (h11.IDLE, h11.DONE) and (self.cycle is None or
                                                                       self.cycle.response_complete)

        def _head_expired(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            if self._waiting_for_head():
                if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:  # part of a head came
                    self.transport.write(_408)
                if on_timeout is not None:
                    on_timeout("header_timeout")
                self.transport.close()
                return
            # The head arrived; the rest of the request has until body_timeout from the same start.
            self._deadline = self.loop.call_later(body_timeout - header_timeout, self._body_expired)

        def _body_expired(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            if self.conn.their_state is h11.SEND_BODY:
                if on_timeout is not None:
                    on_timeout("body_timeout")
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this keep-alive connection gets its own deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return DeadlineH11Protocol
