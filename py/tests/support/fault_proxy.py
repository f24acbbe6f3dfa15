"""A TCP proxy between a client and a store server that can stop answering:
the store faults of tests/test_faults.py.

Modes: ``forward`` (bytes pass both ways), ``blackhole`` (what the client
sends is still forwarded, so its statements commit, but what the server
answers is held back, and a new connection is accepted and left hanging,
never connected to the server). :meth:`FaultProxy.reset` closes every
connection (the held answers are lost) and forwards again. The proxy runs
its own event loop in a daemon thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, List, Optional, Set, Tuple


class _Pair:
    """One client connection and, once connected, the proxy's connection to the server."""

    def __init__(self, client: asyncio.StreamWriter):
        self.client = client
        self.server: Optional[asyncio.StreamWriter] = None
        self.held: List[bytes] = []


class FaultProxy:
    """Listens on 127.0.0.1 (:attr:`port`) and passes each connection on to `upstream` (``(host, port)``)."""

    def __init__(self, upstream: Tuple[str, int]):
        self.upstream = upstream
        self.mode = "forward"
        self._pairs: Set[_Pair] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        self._server: Any = self._call(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port: int = self._server.sockets[0].getsockname()[1]

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pair = _Pair(writer)
        self._pairs.add(pair)
        try:
            if self.mode == "blackhole":
                await reader.read()  # a new connection hangs: read nothing on, answer nothing
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            except OSError:
                return
            pair.server = up_writer
            await asyncio.gather(self._up(reader, up_writer), self._down(up_reader, pair),
                                 return_exceptions=True)
        finally:
            self._pairs.discard(pair)
            for w in (pair.client, pair.server):
                if w is not None:
                    w.transport.abort()

    async def _up(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Client to server: always forwarded (in a blackhole too: the statements commit)."""
        while True:
            data = await reader.read(65536)
            if not data:
                writer.transport.abort()
                return
            writer.write(data)
            await writer.drain()

    async def _down(self, reader: asyncio.StreamReader, pair: _Pair) -> None:
        """Server to client: held back in a blackhole."""
        while True:
            data = await reader.read(65536)
            if not data:
                pair.client.transport.abort()
                return
            if self.mode == "blackhole":
                pair.held.append(data)
                continue
            if pair.held:
                data, pair.held = b"".join(pair.held) + data, []
            pair.client.write(data)
            await pair.client.drain()

    def blackhole(self) -> None:
        """Stops answering: client bytes still go through, server bytes are held, new connections hang."""
        self.mode = "blackhole"

    def reset(self) -> None:
        """Closes every connection (the held answers are lost) and forwards again."""

        async def close_all() -> None:
            self.mode = "forward"
            for pair in list(self._pairs):
                for w in (pair.client, pair.server):
                    if w is not None:
                        w.transport.abort()

        self._call(close_all())

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            for pair in list(self._pairs):
                for w in (pair.client, pair.server):
                    if w is not None:
                        w.transport.abort()

        self._call(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
