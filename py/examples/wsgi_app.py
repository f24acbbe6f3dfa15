"""A Flask app whose POST /orders runs at most once per Idempotency-Key.

    INTENTKEY_SECRET=$(python -c "import secrets; print(secrets.token_hex(32))") \
        flask --app wsgi_app run --port 8000
"""

import os
import secrets

from flask import Flask, request

import intentkey
from intentkey.wsgi import IdempotencyMiddleware

SECRET = os.environ.get("INTENTKEY_SECRET") or secrets.token_hex(32)

app = Flask(__name__)
orders: list = []


@app.post("/orders")
def create_order():
    idem = request.environ["intentkey.idempotency"]  # the storage key and the tenant
    orders.append(request.get_json())  # the effect: runs once per key
    return {"id": len(orders), "tenant": idem.tenant_id}, 201


app.config["PROPAGATE_EXCEPTIONS"] = True  # a route that raises reaches the middleware (its record stays in flight)
app.wsgi_app = IdempotencyMiddleware(
    app.wsgi_app,
    secret=SECRET,
    store=intentkey.MemoryStore(),  # a shared store in production (intentkey.stores)
    profile="ietf",
    tenant=lambda environ: environ.get("HTTP_X_TENANT", "public"),
)
