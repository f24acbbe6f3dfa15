"""What the ASGI middleware costs a Starlette app over real HTTP, next to each
store's floor in the same server: the Python side of js/bench/http.mjs.

One uvicorn server process serves every app under its own path prefix (one
dispatching ASGI function in front, the same for all): the same handler
(``POST /orders``, JSON body ``{"sku":"A1","qty":2}``, answered 201 with a
Location and a small JSON body) bare, behind ``intentkey.asgi.IdempotencyMiddleware``
over ``AsyncMemoryStore``, ``AsyncRedisStore`` (a fresh prefix) and
``AsyncPostgresStore`` (a fresh schema), and the floors: Redis ``SET NX``, the
handler, ``SET XX`` (redis.asyncio), and one ``GET`` for a replay; PostgreSQL
a bare INSERT, the handler, a bare UPDATE, each its own commit (psycopg's async
pool, prepared), into a table made by the store's schema in a second fresh
schema, and one SELECT for a replay. The client is this process
(``http.client``, one keep-alive connection, one request in flight); methods
alternate round after round. Every answer is checked, and the handler's run
counts at the end. Everything written is removed at the end.

Run: python py/bench/http_asgi.py [--rounds 10 --per-round 200 --no-pg --no-redis]
(the installed package, with uvicorn, starlette, redis and psycopg from
requirements-dev.txt; PostgreSQL and Redis as the tests find them).
"""
import argparse
import asyncio
import http.client
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
import uuid

BODY = b'{"sku":"A1","qty":2}'
SECRET = bytes.fromhex("5c" * 32)
PG_DSN = os.environ.get("INTENTKEY_TEST_PG", "host=127.0.0.1 port=5432 user=postgres dbname=test")
REDIS_URL = os.environ.get("INTENTKEY_BENCH_REDIS", "redis://127.0.0.1:6379/2")


# ------------------------------------------------------------------ the server


def serve(port: int, with_pg: bool, with_redis: bool) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from intentkey.aio import AsyncMemoryStore
    from intentkey.asgi import IdempotencyMiddleware

    runs: dict = {}

    def handler_for(name: str):
        counts = runs.setdefault(name, {"total": 0, "keys": {}})

        async def create_order(request: Request) -> Response:
            payload = await request.json()
            key = request.headers.get("idempotency-key", "")
            counts["total"] += 1
            counts["keys"][key] = counts["keys"].get(key, 0) + 1
            order = f"ord_{counts['total']}"
            return JSONResponse({"id": order, "sku": payload["sku"], "qty": payload["qty"], "status": "accepted"},
                                status_code=201, headers={"location": f"/orders/{order}"})

        return create_order

    def app_of(name: str, middleware=()):
        return Starlette(routes=[Route("/orders", handler_for(name), methods=["POST"])], middleware=list(middleware))

    def guarded(name: str, store):
        return app_of(name, [Middleware(IdempotencyMiddleware, secret=SECRET, store=store)])

    def floor_apps(name: str, claim, complete, read):
        handle = handler_for(name)

        async def first(request: Request) -> Response:
            key = request.headers["idempotency-key"]
            if not await claim(key):
                raise RuntimeError(f"{name}: the floor's claim lost on a new key")
            answer = await handle(request)
            stored = json.dumps({"status": answer.status_code, "location": answer.headers["location"],
                                 "body": json.loads(answer.body)})
            await complete(key, stored)
            return answer

        async def replay(request: Request) -> Response:
            stored = json.loads(await read(request.headers["idempotency-key"]))
            return JSONResponse(stored["body"], status_code=stored["status"], headers={"location": stored["location"]})

        return (Starlette(routes=[Route("/orders", first, methods=["POST"])]),
                Starlette(routes=[Route("/orders", replay, methods=["POST"])]))

    async def main() -> None:
        apps = {"bare": app_of("bare"), "ik-memory": guarded("ik-memory", AsyncMemoryStore())}
        closers = []
        if with_redis:
            import redis.asyncio as redis_aio
            from intentkey.stores.redis import AsyncRedisStore

            prefix = f"ikpybench-{os.getpid()}"
            client = redis_aio.Redis.from_url(REDIS_URL)
            floor = redis_aio.Redis.from_url(REDIS_URL)
            apps["ik-redis"] = guarded("ik-redis", AsyncRedisStore(client, prefix=prefix))

            async def r_claim(key):
                return bool(await floor.set(f"{prefix}:floor:{key}", "ik1 in_flight", nx=True))

            async def r_complete(key, answer):
                if not await floor.set(f"{prefix}:floor:{key}", answer, xx=True):
                    raise RuntimeError("the floor lost its record")

            async def r_read(key):
                return await floor.get(f"{prefix}:floor:{key}")

            apps["floor-redis"], apps["floor-redis-read"] = floor_apps("floor-redis", r_claim, r_complete, r_read)

            async def close_redis():
                async for k in client.scan_iter(match=f"{prefix}:*", count=1000):
                    await client.delete(k)
                await client.aclose()
                await floor.aclose()

            closers.append(close_redis)
        if with_pg:
            import psycopg
            from psycopg_pool import AsyncConnectionPool
            from intentkey.stores.postgres import AsyncPostgresStore

            schemas = [f"ik_py_bench_{secrets.token_hex(6)}" for _ in range(2)]
            with psycopg.connect(PG_DSN, autocommit=True) as admin:
                for s in schemas:
                    admin.execute(f"CREATE SCHEMA {s}")
            pools = [AsyncConnectionPool(f"{PG_DSN} options='-c search_path={s}'", min_size=4, max_size=4, open=False)
                     for s in schemas]
            for p in pools:
                await p.open(wait=True)
            store = AsyncPostgresStore(pools[0])
            await AsyncPostgresStore(pools[1]).migrate()  # the floor's table: the store's own schema
            apps["ik-pg"] = guarded("ik-pg", store)
            floor_pool = pools[1]
            token = "0123456789abcdef0123456789abcdef"

            async def p_claim(key):
                async with floor_pool.connection() as conn:
                    cur = await conn.execute(
                        "INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, owner_token, "
                        "created_at, lookups) VALUES (%s, 'fp', 't', 'a', 'in_flight', %s, %s, 0) "
                        "ON CONFLICT (key) DO NOTHING", (key, token, int(time.time())), prepare=True)
                    return cur.rowcount == 1

            async def p_complete(key, answer):
                async with floor_pool.connection() as conn:
                    await conn.execute(
                        "UPDATE intentkey_records SET status = 'done', response_status = 201, "
                        "response_content_type = 'application/json', response_headers = NULL, response_body = %s, "
                        "expires_at = %s, next_lookup_at = NULL WHERE key = %s",
                        (answer, int(time.time()) + 86400, key), prepare=True)

            async def p_read(key):
                async with floor_pool.connection() as conn:
                    cur = await conn.execute("SELECT response_body FROM intentkey_records WHERE key = %s", (key,),
                                             prepare=True)
                    return (await cur.fetchone())[0]

            apps["floor-pg"], apps["floor-pg-read"] = floor_apps("floor-pg", p_claim, p_complete, p_read)

            async def close_pg():
                for p in pools:
                    await p.close()
                with psycopg.connect(PG_DSN, autocommit=True) as admin:
                    for s in schemas:
                        admin.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")

            closers.append(close_pg)

        async def dispatch(scope, receive, send):
            if scope["type"] == "lifespan":
                while True:
                    message = await receive()
                    if message["type"] == "lifespan.startup":
                        await send({"type": "lifespan.startup.complete"})
                    elif message["type"] == "lifespan.shutdown":
                        await send({"type": "lifespan.shutdown.complete"})
                        return
            path = scope["path"]
            if path == "/_shutdown":
                # The client is done: serve() returns and the closers remove what was written.
                server.should_exit = True
                await send({"type": "http.response.start", "status": 204, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            if path == "/_stats":
                body = json.dumps({name: {"total": c["total"], "distinct": len(c["keys"]),
                                          "max": max(c["keys"].values(), default=0)} for name, c in runs.items()})
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": body.encode()})
                return
            name, _, rest = path[1:].partition("/")
            sub = dict(scope, path="/" + rest, raw_path=("/" + rest).encode())
            await apps[name](sub, receive, send)

        config = uvicorn.Config(dispatch, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                                lifespan="on")
        server = uvicorn.Server(config)
        try:
            print(json.dumps({"ready": sorted(apps)}), flush=True)
            await server.serve()
        finally:
            for close in closers:
                await close()

    asyncio.run(main())


# ------------------------------------------------------------------ the client


def drive(args) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, __file__, "--serve", str(port)] + (["--no-pg"] if args.no_pg else []) + (
        ["--no-redis"] if args.no_redis else [])
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        apps = json.loads(server.stdout.readline())["ready"]
        conn = None
        for _ in range(100):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port)
                conn.request("POST", "/_stats")
                conn.getresponse().read()
                break
            except OSError:
                time.sleep(0.05)
        code = run(conn, apps, args)
        conn.request("POST", "/_shutdown")
        conn.getresponse().read()
        conn.close()
        server.wait(timeout=60)
        return code
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)


def run(conn, apps, args) -> int:
    def post(app: str, key: str):
        headers = {"content-type": "application/json", "idempotency-key": f'"{key}"'}
        t0 = time.perf_counter_ns()
        conn.request("POST", f"/{app}/orders", body=BODY, headers=headers)
        res = conn.getresponse()
        body = res.read()
        t1 = time.perf_counter_ns()
        return t1 - t0, res.status, res.getheader("location"), res.getheader("idempotent-replayed"), body

    replay_key = str(uuid.uuid4())
    stored = {}
    firsts = {a: 0 for a in apps}
    for app in apps:
        if app.endswith("-read"):
            continue
        _, status, location, _, body = post(app, replay_key)
        firsts[app] += 1
        if status != 201:
            raise SystemExit(f"{app}: the seeding request got {status}: {body[:200]!r}")
        stored[app] = (location, json.loads(body))
    for app in apps:
        stored.setdefault(app, stored.get(app.removesuffix("-read")))

    def pair(label, app, replay_app=None, marks=True):
        return [(f"{label}, first", app, "first", marks), (f"{label}, replay", replay_app or app, "replay", marks)]

    methods = [("bare Starlette", "bare", "first", False)] + pair("intentkey memory", "ik-memory")
    if "ik-redis" in apps:
        methods += pair("intentkey Redis", "ik-redis") + pair("floor Redis", "floor-redis", "floor-redis-read", False)
    if "ik-pg" in apps:
        methods += pair("intentkey PostgreSQL", "ik-pg") + pair("floor PostgreSQL", "floor-pg", "floor-pg-read", False)

    failures = []
    samples = {m[0]: [] for m in methods}
    for rnd in range(args.warmup + args.rounds):
        for j in range(len(methods)):
            name, app, kind, marks = methods[(j + rnd) % len(methods)]
            mine = []
            for _ in range(args.per_round):
                key = str(uuid.uuid4()) if kind == "first" else replay_key
                ns, status, location, replayed, body = post(app, key)
                if kind == "first":
                    firsts[app] += 1
                    if status != 201 or not (location or "").startswith("/orders/ord_") or replayed is not None:
                        failures.append(f"{name}: {status} {location} {replayed} {body[:100]!r}")
                elif status != 201 or (marks and replayed is None) or json.loads(body) != stored[app][1]:
                    failures.append(f"{name}: {status} {replayed} {body[:100]!r}")
                mine.append(ns)
            if rnd >= args.warmup:
                samples[name].extend(mine)
        if failures:
            break
        print(f"round {rnd + 1} of {args.warmup + args.rounds}", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    conn.request("POST", "/_stats")
    counts = json.loads(conn.getresponse().read())
    for app, c in counts.items():
        if c["total"] != firsts[app] or c["distinct"] != firsts[app] or c["max"] != 1:
            failures.append(f"{app}: the handler ran {c['total']} times for {firsts[app]} first requests "
                            f"({c['distinct']} keys, at most {c['max']} per key)")
    if failures:
        print("FAILED: a method did not behave; no figures are reported.", file=sys.stderr)
        for f in failures[:20]:
            print(f"  - {f}", file=sys.stderr)
        return 1

    p50 = {name: statistics.median(xs) / 1000 for name, xs in samples.items()}
    bare = p50["bare Starlette"]
    print(f"python {sys.version.split()[0]}, {args.rounds} rounds x {args.per_round} requests per method "
          f"(after {args.warmup} warm-up rounds), load average {os.getloadavg()[0]:.1f}; µs per request\n")
    print("| method | p50 | overhead (p50 - bare p50) |")
    print("|---|---|---|")
    for name, v in p50.items():
        print(f"| {name} | {v:.1f} | {'—' if name == 'bare Starlette' else f'{v - bare:.1f}'} |")
    print("\n| case | intentkey overhead | floor overhead | ratio |")
    print("|---|---|---|---|")
    for store in ("Redis", "PostgreSQL"):
        for kind in ("first", "replay"):
            ik, fl = f"intentkey {store}, {kind}", f"floor {store}, {kind}"
            if ik in p50 and fl in p50:
                a, b = p50[ik] - bare, p50[fl] - bare
                print(f"| {store}, {kind} | {a:.1f} | {b:.1f} | {a / b:.2f} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--per-round", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--no-redis", action="store_true")
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, not args.no_pg, not args.no_redis)
        return 0
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
