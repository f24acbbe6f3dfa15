"""A FastAPI app whose POST /orders runs at most once per Idempotency-Key.

    INTENTKEY_SECRET=$(python -c "import secrets; print(secrets.token_hex(32))") \
        uvicorn asgi_app:app --port 8000
    curl -X POST localhost:8000/orders -H 'Idempotency-Key: order-1' \
        -H 'Content-Type: application/json' -d '{"sku": "tea", "qty": 2}'

The same request again gets the stored answer (``Idempotent-Replayed: true``);
another body with the same key gets 422; a retry while the first is still
running gets 409 with ``Retry-After``.
"""

import os
import secrets

from fastapi import FastAPI, Request

from intentkey.aio import AsyncMemoryStore
from intentkey.asgi import IdempotencyMiddleware

# The same secret on every server of the API, kept out of the code (hex or bytes).
# A fresh one per process only suits a demo with one process.
SECRET = os.environ.get("INTENTKEY_SECRET") or secrets.token_hex(32)

app = FastAPI()
orders: list = []


@app.post("/orders", status_code=201)
async def create_order(order: dict, request: Request) -> dict:
    idem = request.scope["intentkey.idempotency"]  # the storage key and the tenant
    orders.append(order)  # the effect: runs once per key
    return {"id": len(orders), "order": order, "tenant": idem.tenant_id}


app.add_middleware(
    IdempotencyMiddleware,
    secret=SECRET,
    store=AsyncMemoryStore(),  # a shared store in production (intentkey.stores)
    profile="ietf",  # Idempotency-Key; "stripe" and "ofb" (x-idempotency-key) too
    tenant=lambda scope: dict(scope["headers"]).get(b"x-tenant", b"public").decode(),
)
