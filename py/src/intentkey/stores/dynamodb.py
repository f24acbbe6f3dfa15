"""A store in one DynamoDB table through boto3's low-level client:
:class:`DynamoDBStore` (sync).

The table, its two indexes, every item and every request are the
component's (the core's DynamoDB layout, through :mod:`intentkey.schema`:
:func:`~intentkey.schema.dynamo_insert` and its siblings, the per-bucket
queries of :func:`~intentkey.schema.dynamo_list` and
:func:`~intentkey.schema.dynamo_purge`, merged by
:func:`~intentkey.schema.dynamo_listed`), the same the Rust and Node stores
send, so processes in every language share one table and the same records
(docs/stores.md, "DynamoDB"). Each request is the input of one DynamoDB API
action in DynamoDB's own JSON form; this module only sends it with
``getattr(client, snake_case(action))(**input)``, converting the binary
values (``{"B": base64}``) to bytes on the way in and back on the way out,
and hands the output to the core as JSON text.

The claim is a ``PutItem`` conditioned on ``attribute_not_exists(#key)``;
completion, recovery writes and release are ``UpdateItem`` or
``DeleteItem`` conditioned on the owner token; a failed condition
(``ConditionalCheckFailedException``) is "not written". Reads are strongly
consistent ``GetItem``. Listing and purging query two sparse indexes, one
``Query`` per bucket, never a ``Scan``. An item is at most 400 KB: the core
refuses a record that cannot fit with ``IntentkeyError``
``response-too-large`` before anything is sent.

>>> import intentkey
>>> from intentkey.stores import DynamoDBStore
>>> store = DynamoDBStore("dynamodb://127.0.0.1:4567/payments")      # doctest: +SKIP
>>> intentkey.Guard(store).run(intentkey.Attempt("k1", "fp", "t", "a"),
...     lambda key: intentkey.Response.json(201, "{}")).outcome       # doctest: +SKIP
'ran'
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import os
import threading
import time
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import unquote

import boto3  # type: ignore[import-untyped]
import botocore.exceptions as bx  # type: ignore[import-untyped]
from botocore import xform_name
from botocore.config import Config  # type: ignore[import-untyped]

from .. import _binding as b
from .. import schema as sch
from ..errors import IntentkeyError
from ..types import Completion, ReleaseRequest, Replacement, Status, StoredRecord, StoreError

__all__ = ["DynamoDBStore"]

#: Seconds a store made from a URL waits to connect, and for each answer.
DEFAULT_TIMEOUT = 10.0
#: Seconds the first operation waits for a table (and its indexes) to become ``ACTIVE``.
READY_TIMEOUT = 60.0
_READY_POLL = 0.1
#: How many times a store made from a URL sends a request that failed retryably
#: (botocore's ``standard`` retry mode, as the Rust SDK's default).
MAX_ATTEMPTS = 3

#: The options a URL's query may carry.
URL_OPTIONS = ("region",)
_KEYWORDS = ("table", "timeout")
#: The region, and the placeholder key, of a local endpoint given neither
#: (a local endpoint such as dynalite checks the signature's form, not its value).
LOCAL_REGION = "us-east-1"
LOCAL_KEY = "local"
_URL_FORM = "dynamodb://HOST:PORT/TABLE or dynamodb://aws/TABLE (with ?region=R)"


# -- DynamoDB's JSON <-> boto3's values: only binary values differ ----------------------------------


def _to_sdk(value: Any) -> Any:
    """A request's input (DynamoDB's JSON, parsed) as boto3 takes it: every
    binary attribute value ``{"B": base64}`` as ``{"B": bytes}``. (In
    DynamoDB's JSON an object whose only member is a string under ``"B"``
    is a binary value: expression names map ``#x`` to strings, and every
    other map holds attribute values, which are objects.)"""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("B"), str):
            return {"B": base64.b64decode(value["B"], validate=True)}
        return {k: _to_sdk(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_sdk(v) for v in value]
    return value


def _from_sdk(value: Any) -> Any:
    """boto3's output as DynamoDB's JSON: bytes as base64 text (and the
    timestamps of ``DescribeTable`` as ISO 8601 text)."""
    if isinstance(value, dict):
        return {k: _from_sdk(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, (list, tuple)):
        return [_from_sdk(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return value


def _json(value: Any) -> str:
    return json.dumps(_from_sdk(value), separators=(",", ":"), default=str)


# -- the URL and the options -----------------------------------------------------------------------------


def _bad_url(message: str) -> IntentkeyError:
    # The URL itself is never echoed: nothing in it is secret today, but a
    # mistyped one could hold anything.
    return IntentkeyError("invalid-argument", "url_or_client", f"bad DynamoDB URL: {message} ({_URL_FORM})")


def _parse_url(url: str) -> Tuple[Optional[str], str, Optional[str]]:
    """(the local endpoint's ``HOST:PORT``, or ``None`` for AWS; the table,
    ``""`` when the URL names none; the region, or ``None``)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "dynamodb":
        raise _bad_url(f"the URL must start with dynamodb:// (it starts with {scheme[:20] + ':' if sep else '(no scheme)'})")
    rest, _, fragment = rest.partition("#")
    if fragment:
        raise _bad_url("a DynamoDB URL has no fragment")
    rest, _, query = rest.partition("?")
    if "@" in rest:  # checked first: a password may hold a slash
        raise _bad_url("a DynamoDB URL holds no credentials (they come from AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY, or boto3's other sources)")
    host, _, table = rest.partition("/")
    region: Optional[str] = None
    for pair in query.split("&"):
        if not pair:
            continue
        raw_name, _, raw_value = pair.partition("=")
        name = unquote(raw_name)
        if name not in URL_OPTIONS:
            raise IntentkeyError("invalid-argument", name,
                                 f"the DynamoDB URL's query names {name!r}, which is not an option: "
                                 f"the store takes {', '.join(URL_OPTIONS)}")
        region = unquote(raw_value)
        if region == "" or not region.isascii() or not all(c.isalnum() or c == "-" for c in region):
            raise IntentkeyError("invalid-argument", "region",
                                 "the URL's region must be an AWS region name such as us-east-1")
    table = unquote(table)
    if host == "":
        raise _bad_url("the URL names no endpoint")
    if "/" in table:
        raise _bad_url("the URL names one table")
    if host.lower() == "aws":
        return None, table, region
    port = host.rpartition(":")[2] if not host.endswith("]") else ""
    if host.startswith(":") or (port and not (port.isdigit() and 0 < int(port) < 65536)):
        raise _bad_url("the endpoint is HOST:PORT")
    return host, table, region


def _env(name: str) -> Optional[str]:
    value = os.environ.get(name)
    return value if value else None


def _client_error(e: Any) -> Tuple[str, str, Optional[int]]:
    """(the error code, its message, the HTTP status) of a botocore ``ClientError``."""
    response = e.response if isinstance(getattr(e, "response", None), dict) else {}
    error = response.get("Error", {})
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return (str(error.get("Code") or type(e).__name__), str(error.get("Message") or "").strip(),
            status if isinstance(status, int) else None)


class _NotFound(Exception):
    """``ResourceNotFoundException``: the table does not exist."""


class DynamoDBStore:
    """A record store in one DynamoDB table (sync: for :class:`intentkey.Guard`).

    `url_or_client`: ``dynamodb://HOST:PORT/TABLE`` (a local endpoint such
    as dynalite, over plain HTTP), ``dynamodb://aws/TABLE`` (AWS's endpoint
    for the region, over HTTPS), each with ``?region=R``; the store makes a
    boto3 client and :meth:`close` closes it. Or a boto3 DynamoDB client
    (``boto3.client("dynamodb", …)``, any low-level botocore client of the
    service), which the caller keeps and configures (endpoint, region,
    credentials, retries, ``max_pool_connections``). `table`: the table's
    name with a client, or with a URL that names none (default
    ``intentkey``). `timeout`: seconds to connect and for each answer (a
    client the store makes).

    Region and credentials of a client the store makes: the URL's region,
    else ``AWS_REGION``, else ``AWS_DEFAULT_REGION``, else the AWS profile's
    (``dynamodb://aws/`` without any is ``invalid-argument`` naming
    ``region``); credentials from boto3's usual sources
    (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
    then the profile, SSO, the instance's role…). A local endpoint defaults
    to ``us-east-1`` and a placeholder key unless ``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY`` are set.

    The client is made, and the table looked up, on first use (or by
    :meth:`ensure_table`): ``DescribeTable``, and when it finds nothing the
    core's ``CreateTable`` (on-demand capacity, both indexes), then
    ``DescribeTable`` again until the table and its indexes are ``ACTIVE``
    (up to 60 s, then ``StoreError("unavailable")``). The store is safe to
    share between threads (boto3's clients are)."""

    #: The store's kind, as telemetry names it (``intentkey.store``).
    kind = "dynamodb"

    def __init__(self, url_or_client: Any, table: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT,
                 **unknown: Any):
        b.no_unknown("intentkey.stores.dynamodb.DynamoDBStore", unknown, ("url_or_client",) + _KEYWORDS)
        self._timeout = b.positive_seconds("timeout", timeout)
        if table is not None:
            b.text("table", table)
        self._client: Any = None
        self._endpoint: Optional[str] = None
        self.region: Optional[str] = None
        self._credentials: Dict[str, str] = {}
        if isinstance(url_or_client, str):
            host, named, region = _parse_url(url_or_client)
            if named and table is not None:
                raise IntentkeyError("invalid-argument", "table",
                                     "the URL names the table already: give table= only with a URL that names none "
                                     "(dynamodb://HOST:PORT) or with a client")
            table = named or table
            self.region = region or _env("AWS_REGION") or _env("AWS_DEFAULT_REGION")
            if host is None:
                self.region = self.region or boto3.session.Session().region_name
                if not self.region:
                    raise IntentkeyError("invalid-argument", "region",
                                         "dynamodb://aws/TABLE needs a region: add ?region=R to the URL, or set "
                                         "AWS_REGION (or AWS_DEFAULT_REGION, or a region in the AWS profile)")
            else:
                self._endpoint = f"http://{host}"
                self.region = self.region or LOCAL_REGION
                if not (_env("AWS_ACCESS_KEY_ID") and _env("AWS_SECRET_ACCESS_KEY")):
                    self._credentials = {"aws_access_key_id": LOCAL_KEY, "aws_secret_access_key": LOCAL_KEY}
            self._owned = True
        else:
            meta = getattr(url_or_client, "meta", None)
            service = getattr(getattr(meta, "service_model", None), "service_name", None)
            if service != "dynamodb":
                raise IntentkeyError("invalid-argument", "url_or_client",
                                     f"DynamoDBStore takes a boto3 DynamoDB client (boto3.client('dynamodb', ...)) "
                                     f"or a URL {_URL_FORM}, not "
                                     + (f"a client of {service}" if isinstance(service, str)
                                        else type(url_or_client).__name__))
            self._client = url_or_client
            self._endpoint = getattr(meta, "endpoint_url", None)
            self.region = getattr(meta, "region_name", None)
            self._owned = False
        #: The table's name.
        self.table: str = table or sch.dynamo_default_table()
        sch.dynamo_check_table(self.table)  # the core's: invalid-argument naming `table`
        self._lock = threading.Lock()  # making the client
        self._ready_lock = threading.Lock()
        self._ready = False
        self._closed = False

    def __repr__(self) -> str:
        where = self._endpoint if self._owned and self._endpoint else ("aws" if self._owned else "client")
        return f"DynamoDBStore(endpoint={where!r}, table={self.table!r}, region={self.region!r}, owned={self._owned})"

    # -- the client and the table ----------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The boto3 DynamoDB client (made from the URL on first use)."""
        client = self._client
        if client is None:
            with self._lock:
                if self._closed:
                    raise StoreError("failed", "dynamodb: the store is closed")
                if self._client is None:
                    config = Config(connect_timeout=self._timeout, read_timeout=self._timeout,
                                    retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS})
                    try:
                        # A session of the store's own: boto3's default session is not thread-safe.
                        self._client = boto3.session.Session().client(
                            "dynamodb", region_name=self.region, endpoint_url=self._endpoint, config=config,
                            **self._credentials)
                    except bx.BotoCoreError as e:
                        raise _failure(e, "client") from None
                client = self._client
        return client

    def ensure_table(self) -> None:
        """Creates the table when ``DescribeTable`` does not find it, then
        waits (up to 60 s) until it and its indexes are ``ACTIVE``. Done on
        first use; afterwards nothing."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            deadline = time.monotonic() + READY_TIMEOUT
            created = False
            describe = sch.dynamo_describe_table(self.table)
            while True:
                try:
                    if sch.dynamo_table_ready(_json(self._output(describe, missing=True))):
                        break
                except _NotFound:
                    if not created:
                        try:
                            self._output(sch.dynamo_create_table(self.table), in_use_ok=True)
                        except _NotFound:  # pragma: no cover - CreateTable never answers it
                            raise StoreError("failed", f"dynamodb: CreateTable of {self.table} answered "
                                                       "ResourceNotFoundException") from None
                        created = True
                if time.monotonic() > deadline:
                    raise StoreError("unavailable", f"dynamodb: table {self.table} and its indexes are not ACTIVE "
                                                    f"after {READY_TIMEOUT:g} s")
                time.sleep(_READY_POLL)
            self._ready = True

    # -- sending the core's requests ----------------------------------------------------------------------

    def _call(self, request: sch.DynamoRequest) -> Any:
        """Sends `request` as it is: boto3's output (its errors raised as they are)."""
        method = getattr(self.client, xform_name(request.action), None) if request.action else None
        if method is None:
            raise StoreError("failed", f"dynamodb: the core asked for an unknown action {request.action!r} (a bug)")
        try:
            params = _to_sdk(request.params())
        except (ValueError, binascii.Error):
            raise StoreError("failed", f"dynamodb: the core's {request.action} is not DynamoDB's JSON (a bug)") from None
        return method(**params)

    def _send(self, request: sch.DynamoRequest, *, missing: bool = False, in_use_ok: bool = False) -> Optional[Any]:
        """Sends `request`: its output, or ``None`` when its condition did
        not hold. Any other failure is a :class:`StoreError` by the core's
        class of its code (`missing`: ``ResourceNotFoundException`` raises
        :class:`_NotFound`; `in_use_ok`: ``ResourceInUseException`` is an
        answer)."""
        try:
            return self._call(request)
        except bx.ClientError as e:
            code, message, status = _client_error(e)
            if missing and code == "ResourceNotFoundException":
                raise _NotFound() from None
            if in_use_ok and code == "ResourceInUseException":
                return {}
            kind = sch.dynamo_classify_error(code, status)
            if kind == "condition-failed":
                return None
            where = f"dynamodb: {request.action}: {code}" + (f": {message}" if message else "")
            raise StoreError("unavailable" if kind == "retryable" else "failed", where) from None
        except bx.BotoCoreError as e:
            raise _failure(e, request.action) from None

    def _output(self, request: sch.DynamoRequest, *, missing: bool = False, in_use_ok: bool = False) -> Any:
        """The output of a request with no condition."""
        out = self._send(request, missing=missing, in_use_ok=in_use_ok)
        if out is None:
            raise StoreError("failed", f"dynamodb: a {request.action} answered a failed condition (it has none)")
        return out

    def _request(self, request: sch.DynamoRequest) -> Optional[Any]:
        """`request` on the table, made ready first."""
        self.ensure_table()
        return self._send(request)

    def _written(self, request: sch.DynamoRequest) -> bool:
        return self._request(request) is not None

    def _pages(self, request: sch.DynamoRequest, want: Optional[int]) -> List[str]:
        """Every page (JSON text) of the ``Query`` `request`, up to `want` items."""
        pages: List[str] = []
        got = 0
        next_request: Optional[sch.DynamoRequest] = request
        while next_request is not None:
            out = self._request(next_request)
            if out is None:
                raise StoreError("failed", "dynamodb: a Query answered a failed condition (it has none)")
            page = _json(out)
            got += len(out.get("Items") or ())
            pages.append(page)
            next_request = sch.dynamo_next_page(next_request, page, got, want)
        return pages

    # -- the store protocol ------------------------------------------------------------------------------------

    def insert(self, record: StoredRecord) -> bool:
        # The core refuses an item over 400 KB (IntentkeyError response-too-large) before anything is sent.
        return self._written(sch.dynamo_insert(self.table, record))

    def get(self, key: str) -> Optional[StoredRecord]:
        out = self._request(sch.dynamo_get(self.table, key))
        item = None if out is None else out.get("Item")
        return None if item is None else sch.dynamo_decode(_json(item))

    def complete(self, completion: Completion) -> bool:
        return self._written(sch.dynamo_complete(self.table, completion))

    def replace(self, replacement: Replacement) -> bool:
        return self._written(sch.dynamo_replace(self.table, replacement))

    def release(self, request: ReleaseRequest) -> bool:
        return self._written(sch.dynamo_release(self.table, request))

    def list(self, status: Optional[Status], limit: int) -> List[StoredRecord]:
        """Records with `status` (every status when ``None``), oldest first,
        at most `limit`: one ``Query`` per bucket (and status), each followed
        page by page up to `limit` items; the core merges them."""
        if limit <= 0:
            return []
        limit = min(int(limit), (1 << 32) - 1)
        pages: List[str] = []
        for request in sch.dynamo_list(self.table, None if status is None else Status(status), limit):
            pages.extend(self._pages(request, limit))
        return sch.dynamo_listed(limit, pages)

    def purge(self, now: int) -> int:
        """Deletes the done records expired at `now`: one ``Query`` per
        bucket, every page; each record a page names is deleted with the
        core's conditional ``DeleteItem`` (a failed condition: a record taken
        over or not yet expired since the index was read, left alone)."""
        deleted = 0
        for request in sch.dynamo_purge(self.table, now):
            for page in self._pages(request, None):
                for delete in sch.dynamo_purge_deletes(self.table, now, page):
                    if self._request(delete) is not None:
                        deleted += 1
        return deleted

    def close(self) -> None:
        """Closes the client if this store made it (a given client is the caller's)."""
        with self._lock:
            self._closed = self._owned
            client, owned = self._client, self._owned
            if owned:
                self._client = None
        if owned and client is not None:
            client.close()

    def __enter__(self) -> "DynamoDBStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _failure(e: BaseException, action: str) -> StoreError:
    """botocore's own error (no answer from DynamoDB) as a store error: a
    refused or dropped connection, a timeout is ``unavailable`` (nothing is
    known to be done); missing credentials, a bad parameter and the like
    ``failed``."""
    unavailable = isinstance(e, (bx.ConnectionError, bx.HTTPClientError))
    if isinstance(e, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        message = ("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                   "(and AWS_SESSION_TOKEN), or configure a profile or a role boto3 finds")
    else:
        message = str(e).strip() or type(e).__name__
    return StoreError("unavailable" if unavailable else "failed", f"dynamodb: {action}: {message}")

