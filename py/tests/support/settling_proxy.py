"""A TCP proxy in front of an HTTP/1.1 server that knows when the server has
answered everything a killed client sent: the kill trials' ``settle`` for a
server that keeps carrying out a request after its client is gone.

dynalite (a Node HTTP server) reads a request whole, then carries it out; a
client SIGKILLed after sending it closes its connection, and the server
goes on and applies the write a moment later. Nothing on the server says
when. So the children of the kill trials talk to the server through this
proxy, which passes each request on once it has all of it
(``Content-Length`` framed) and counts the complete answers that come back
on each connection. When a client goes away the proxy keeps the server's
side open until every request it passed on has been answered (the server
applied it, or refused it), then closes it; a request cut short by the kill
is never passed on (the server would not have acted on it either).
:meth:`SettlingProxy.settle` waits until every connection is finished that
way.

That also spares dynalite a connection closed in the middle of a request,
which kills it (its handler rethrows the request's ``aborted`` error).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Set, Tuple


class _Messages:
    """The complete HTTP/1.1 messages (a head, then a body of
    ``Content-Length`` bytes) of a byte stream fed in pieces: :meth:`feed`
    answers the bytes of the messages it completed (the rest is kept until
    its message is whole)."""

    def __init__(self) -> None:
        self.kept = bytearray()  # the message begun and not ended
        self.head_end = -1  # where its head ends, once known
        self.length = 0  # its whole length, once its head is known
        self.complete = 0

    def feed(self, data: bytes) -> bytes:
        self.kept += data
        done = bytearray()
        while True:
            if self.head_end < 0:
                end = self.kept.find(b"\r\n\r\n")
                if end < 0:
                    return bytes(done)
                self.head_end = end + 4
                body = 0
                for line in bytes(self.kept[:end]).decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        body = int(value.strip())
                self.length = self.head_end + body
            if len(self.kept) < self.length:
                return bytes(done)
            done += self.kept[:self.length]
            del self.kept[:self.length]
            self.head_end, self.length = -1, 0
            self.complete += 1

    @property
    def partial(self) -> bool:
        """Whether a message has begun and not ended."""
        return bool(self.kept)


class _Pair:
    """One client connection and the proxy's connection to the server for it."""

    def __init__(self, client: socket.socket, server: socket.socket):
        self.client, self.server = client, server
        self.requests, self.answers = _Messages(), _Messages()
        self.lock = threading.Condition()
        self.client_gone = False
        self.server_gone = False


class SettlingProxy:
    """Listens on 127.0.0.1 (:attr:`port`) and passes every connection on
    to `upstream` (``(host, port)``)."""

    def __init__(self, upstream: Tuple[str, int]):
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._pairs: Set[_Pair] = set()
        self._lock = threading.Condition()
        self._start(self._accept)

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.add(pair)
            self._start(self._from_client, pair)
            self._start(self._from_server, pair)

    def _from_client(self, pair: _Pair) -> None:
        try:
            while True:
                data = pair.client.recv(65536)
                if not data:
                    break
                with pair.lock:
                    whole = pair.requests.feed(data)
                if whole:
                    pair.server.sendall(whole)  # whole requests only: never one cut short
        except OSError:
            pass
        with pair.lock:
            pair.client_gone = True
            # Wait for the answers to every request passed on (a request
            # cut short was never passed on), then close the server's side.
            while not pair.server_gone and pair.answers.complete < pair.requests.complete:
                pair.lock.wait(1)
        self._shut(pair.server)
        self._finish(pair)

    def _from_server(self, pair: _Pair) -> None:
        try:
            while True:
                data = pair.server.recv(65536)
                if not data:
                    break
                with pair.lock:
                    pair.answers.feed(data)
                    pair.lock.notify_all()
                try:
                    pair.client.sendall(data)
                except OSError:
                    pass  # the client is gone: the answers are still counted
        except OSError:
            pass
        with pair.lock:
            pair.server_gone = True
            pair.lock.notify_all()
        self._shut(pair.client)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _finish(self, pair: _Pair) -> None:
        pair.client.close()
        pair.server.close()
        with self._lock:
            self._pairs.discard(pair)
            self._lock.notify_all()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def settle(self, timeout: float = 60.0) -> None:
        """Waits until every connection is finished: its client gone and
        every complete request it sent answered by the server."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pairs:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self._pairs)} connections through the proxy were never settled"
                self._lock.wait(min(left, 0.5))

    def close(self) -> None:
        """Stops listening, and ends the connections still open: each
        client's side is closed, and each server's side once its requests
        are answered (never in the middle of one)."""
        self._shut(self._listener)  # wakes the accepting thread
        self._listener.close()
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._shut(pair.client)
        self.settle()
