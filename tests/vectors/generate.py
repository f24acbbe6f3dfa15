#!/usr/bin/env python3
"""Generate intentkey's golden vectors (tests/vectors/*.json).

Every `fields` vector with a default policy is computed by running the reference
oracle (../shared/oracle/seed_reference.py, the source article's code) and checked
against an independent model of the project rules (the spec: where intentkey
deliberately refuses or canonicalizes what the oracle accepts). Each case carries an
annotation (valid / invalid with code, and whether the oracle accepts or raises);
the generator FAILS when the oracle, the model and the annotation disagree.

Usage (from the repository root):
    python3 tests/vectors/generate.py            # (re)write the vector files
    python3 tests/vectors/generate.py --check    # exit 1 if a committed file differs
    python3 tests/vectors/generate.py --oracle PATH

The oracle is not part of this repository. Without --oracle, --check prints one
SKIPPED line and exits 0 when ../shared/oracle/seed_reference.py is not beside
the clone (so a lone clone's test run passes); writing the files needs it.

Standard library only. Output is deterministic.
"""
import argparse
import hashlib
import hmac
import importlib.util
import json
import re
import sys
import unicodedata
import uuid
from decimal import Decimal, ROUND_HALF_UP, Context, InvalidOperation
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_ORACLE = REPO.parent / "shared" / "oracle" / "seed_reference.py"
ORACLE_ABSENT = "the reference oracle ../shared/oracle/seed_reference.py is not beside this clone"

SCHEMA = "intentkey_vectors_v1"
GENERATOR_VERSION = "1"

ERROR_CODES = frozenset("""
secret-too-short invalid-secret invalid-tenant-id invalid-action-type unknown-action-type
invalid-epoch invalid-payload unclassified-fields invalid-field-type invalid-decimal
decimal-out-of-range invalid-integer invalid-currency invalid-pix-key invalid-intent-id
invalid-policy invalid-json invalid-key-length
""".split())

ORACLE = None  # the loaded oracle module


class GenError(Exception):
    """An annotation, the oracle and the model disagree: the generator stops."""


def load_oracle(path):
    path = Path(path)
    if not path.is_file():
        raise GenError("oracle not found: %s (use --oracle PATH)" % path)
    spec = importlib.util.spec_from_file_location("seed_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("derive_material", "derive_idempotency_key", "normalize_text",
                 "normalize_creditor_key", "normalize_currency", "normalize_amount",
                 "run_case"):
        if not callable(getattr(module, name, None)):
            raise GenError("oracle %s lacks %s()" % (path, name))
    return module


# ---------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------
DEVIATION = "ORACLE_DEVIATION"      # oracle accepts, intentkey refuses
CANON = "CANONICALIZATION"          # oracle accepts, intentkey canonicalizes

FLAGS = {
    # deviations from the oracle
    "ShortSecret": (DEVIATION, "The secret is shorter than 32 bytes. The oracle keys HMAC with any length (even empty); intentkey refuses with secret-too-short."),
    "EmptyTenantId": (DEVIATION, "tenant_id is the empty string. The oracle hashes it; intentkey refuses with invalid-tenant-id."),
    "EmptyActionType": (DEVIATION, "action_type is the empty string. The oracle hashes it; intentkey refuses with invalid-action-type."),
    "NonStringIdentity": (DEVIATION, "tenant_id or action_type is not a JSON string (a number, null or an array). The oracle serializes it into the material; intentkey refuses (invalid-tenant-id / invalid-action-type)."),
    "NonObjectPayload": (DEVIATION, "The payload is not a JSON object but the oracle accepts it (an empty array or empty string has no members, so nothing is unclassified); intentkey refuses with invalid-payload."),
    "NanAmount": (DEVIATION, "A NaN amount string. Python's Decimal parses it and quantize keeps a quiet NaN, so the oracle hashes \"NaN\"; intentkey refuses with invalid-decimal."),
    "UnderscoreDigits": (DEVIATION, "An amount string with '_' digit separators. Python's Decimal accepts them; intentkey refuses with invalid-decimal."),
    "NonAsciiDigits": (DEVIATION, "Non-ASCII decimal digits (Arabic-Indic, fullwidth...). Python's Decimal and the \\d regex accept them; intentkey refuses (invalid-decimal for amounts, invalid-pix-key for document keys)."),
    "EmptyPixKey": (DEVIATION, "The pix key normalizes to the empty string. The oracle hashes \"\"; intentkey refuses with invalid-pix-key."),
    "CurrencyNotThreeLetters": (DEVIATION, "The stripped currency is not exactly 3 ASCII letters. The oracle hashes whatever strip().upper() gives; intentkey refuses with invalid-currency."),
    "DeepNesting": (DEVIATION, "The payload nests deeper than 100 levels (inside an ignored field, so the oracle never looks); intentkey refuses with invalid-payload."),
    "NonIntegerEpoch": (DEVIATION, "intent_epoch is not a JSON integer literal (1.5, 1e3, \"123\", true). The oracle's int() truncates or converts it; intentkey refuses with invalid-epoch."),
    "EpochOutOfRange": (DEVIATION, "intent_epoch is an integer outside signed 64-bit. Python has big integers; intentkey refuses with invalid-epoch."),
    "SecretHexSpaces": (DEVIATION, "secret_hex contains spaces. Python's bytes.fromhex skips them; intentkey refuses with invalid-secret."),
    "NonStandardJson": (DEVIATION, "The line uses what Python's json module accepts but JSON does not (NaN/Infinity literals, a lone surrogate escape). intentkey refuses with invalid-json."),
    "NegativeZeroCanonicalized": (CANON, "The amount quantizes to a negative zero. The oracle hashes \"-0.00\"; intentkey canonicalizes to \"0.00\" (expected key and material use \"0.00\", oracleKey/oracleMaterial record the oracle's)."),
    # informational
    "PythonWhitespace": ("EDGE_CASE", "Stripping uses Python's str.isspace set (includes U+001C..U+001F, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), not only ASCII whitespace."),
    "NotWhitespace": ("EDGE_CASE", "U+200B ZERO WIDTH SPACE and U+FEFF are not whitespace for Python: strip keeps them."),
    "CaseFolding": ("EDGE_CASE", "Full Unicode case folding (str.casefold), which differs from lowercasing."),
    "Nfc": ("EDGE_CASE", "Text is put in Unicode NFC before stripping and case folding."),
    "JsonEscaping": ("EDGE_CASE", "Material escaping must match Python json.dumps(ensure_ascii=False): \\\" \\\\ \\n \\r \\t \\b \\f, other C0 as \\u00xx lowercase, nothing else escaped."),
    "AstralChars": ("EDGE_CASE", "Characters outside the BMP (surrogate pairs in UTF-16 / JSON escapes)."),
    "FloatAmount": ("EDGE_CASE", "A JSON number with '.', 'e' or 'E' is an IEEE double printed as Python str(float) before quantizing."),
    "HalfUpRounding": ("EDGE_CASE", "Quantizing rounds half away from zero (ROUND_HALF_UP) on the exact decimal value."),
    "IntegerAmount": ("EDGE_CASE", "A JSON integer literal amount is taken exactly, however large."),
    "DecimalString": ("EDGE_CASE", "An amount given as a JSON string of decimal text."),
    "Precision28": ("EDGE_CASE", "Python's decimal context has 28 significant digits: a quantized result needing more is decimal-out-of-range."),
    "BucketBoundary": ("EDGE_CASE", "bucket = floor(intent_epoch / bucketSeconds), floor toward minus infinity."),
    "IgnoredField": ("FUNCTIONALITY", "An ignored field never enters the material, whatever its JSON value."),
    "MissingField": ("FUNCTIONALITY", "A policy field absent from the payload is left out of the body."),
    "DuplicateMember": ("EDGE_CASE", "A JSON object repeats a member name: the last one wins (Python json)."),
    "MemberOrder": ("FUNCTIONALITY", "Payload member order does not matter: the body is serialized with sorted keys."),
    "PixKeyForm": ("FUNCTIONALITY", "pix-key: strip; only digits . - / keeps the digits, anything else is case folded."),
    "CurrencyForm": ("FUNCTIONALITY", "currency: strip then uppercase; must be 3 ASCII letters."),
    "UnclassifiedField": ("FUNCTIONALITY", "A payload member the policy does not classify is refused with unclassified-fields."),
    "FieldType": ("MALFORMED_INPUT", "A field's JSON type does not fit its normalizer: invalid-field-type."),
    "MalformedDecimal": ("MALFORMED_INPUT", "An amount that is not decimal text, or not a finite number."),
    "SecretLength": ("FUNCTIONALITY", "Secrets of 32 bytes or more are accepted, any length."),
    "Basic": ("FUNCTIONALITY", "An ordinary well-formed case."),
    "RequestLine": ("FUNCTIONALITY", "The JSON-lines request contract: members, types and the echoed id."),
    "InvalidJson": ("MALFORMED_INPUT", "The line is not a JSON object in strict JSON."),
    "CustomPolicy": ("FUNCTIONALITY", "Derivation under a custom policy (bucketSeconds, keyHexLength, actionTypes, normalizers)."),
    "IntegerNormalizer": ("FUNCTIONALITY", "integer normalizer: JSON integer literal or a string matching ^-?[0-9]+$, printed as str(int(x))."),
    "ExactNormalizer": ("FUNCTIONALITY", "exact normalizer: the string verbatim (no NFC, no strip, no folding)."),
    "DecimalScale": ("FUNCTIONALITY", "decimal normalizer with a policy scale (0..18)."),
    "DecimalPlainNotation": ("EDGE_CASE", "A decimal at scale >= 7 whose adjusted exponent is below -6 is written in plain fixed-point notation (\"0.000000000000000001\", \"0.0000000\"), where Python's str(Decimal) would print scientific form (\"1E-18\", \"0E-7\"). Policy decimals are fixed-point text in every language."),
    "KeyTruncation": ("FUNCTIONALITY", "keyHexLength < 64: the key is the first N hex digits of the HMAC."),
    "UnknownActionType": ("FUNCTIONALITY", "The policy lists actionTypes and the action type is not one of them."),
    "FingerprintClassField": ("FUNCTIONALITY", "A fingerprint-class field is not part of the key material."),
    "CodePointOrder": ("EDGE_CASE", "Object keys sort by Unicode code point (Python str order, = UTF-8 byte order), not UTF-16 code units."),
    "DefaultPolicyJson": ("FUNCTIONALITY", "The built-in default policy written out as JSON gives the built-in default's keys."),
    "PolicyValidation": ("MALFORMED_INPUT", "An invalid policy document: invalid-policy with the dotted path of the offending entry."),
    "KeyLength": ("FUNCTIONALITY", "The key length must be 32..=64 hex digits."),
    "UnicodeId": ("EDGE_CASE", "Non-ASCII identifiers: hashed as UTF-8, never escaped."),
    "FingerprintField": ("FUNCTIONALITY", "A fingerprint-class field enters the fingerprint as its JSON value (Python json.loads value, canonical json.dumps)."),
    "IgnoredFieldNoEffect": ("FUNCTIONALITY", "Ignored fields do not change the fingerprint."),
    "UuidV4": ("FUNCTIONALITY", "UUID version 4 from 16 host-supplied random bytes: version and variant bits forced."),
}
for _name, (_bt, _d) in FLAGS.items():
    assert _bt and _d, _name


def notes_for(flags_used):
    return {f: {"bugType": FLAGS[f][0], "description": FLAGS[f][1]} for f in sorted(flags_used)}


# ---------------------------------------------------------------------------
# Helpers shared by the model
# ---------------------------------------------------------------------------
C0_NAMES = ["NULL", "START OF HEADING", "START OF TEXT", "END OF TEXT", "END OF TRANSMISSION",
            "ENQUIRY", "ACKNOWLEDGE", "BELL", "BACKSPACE", "CHARACTER TABULATION", "LINE FEED",
            "LINE TABULATION", "FORM FEED", "CARRIAGE RETURN", "SHIFT OUT", "SHIFT IN",
            "DATA LINK ESCAPE", "DEVICE CONTROL ONE", "DEVICE CONTROL TWO", "DEVICE CONTROL THREE",
            "DEVICE CONTROL FOUR", "NEGATIVE ACKNOWLEDGE", "SYNCHRONOUS IDLE",
            "END OF TRANSMISSION BLOCK", "CANCEL", "END OF MEDIUM", "SUBSTITUTE", "ESCAPE",
            "INFORMATION SEPARATOR FOUR (FILE SEPARATOR)",
            "INFORMATION SEPARATOR THREE (GROUP SEPARATOR)",
            "INFORMATION SEPARATOR TWO (RECORD SEPARATOR)",
            "INFORMATION SEPARATOR ONE (UNIT SEPARATOR)"]


def uname(c):
    o = ord(c)
    if o < 0x20:
        n = C0_NAMES[o]
    elif o == 0x7F:
        n = "DELETE"
    elif o == 0x85:
        n = "NEXT LINE (NEL)"
    else:
        n = unicodedata.name(c, "<unnamed>")
    return "U+%04X %s" % (o, n)


WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
SPEC_WHITESPACE = ([chr(c) for c in range(0x09, 0x0E)] + [chr(c) for c in range(0x1C, 0x20)]
                   + ["\x20", "\x85", "\xa0", "\u1680"] + [chr(c) for c in range(0x2000, 0x200B)]
                   + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"])
assert WHITESPACE == SPEC_WHITESPACE, "Python's whitespace set differs from the spec's list"

I64_MIN, I64_MAX = -(2 ** 63), 2 ** 63 - 1
DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
DOC_KEY = re.compile(r"[\d.\-/]+")   # Python \d: every Unicode decimal digit, as the oracle
ASCII_DIGITS = frozenset("0123456789")


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def canonical(obj):
    """The material serialization (Python json.dumps canonical form), UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def mac(secret, material):
    return hmac.new(secret, material, hashlib.sha256).hexdigest()


def container_depth(v):
    """Nesting depth counting containers only: {} is 1, {"a": []} is 2, scalars 0."""
    if isinstance(v, dict):
        return 1 + max((container_depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((container_depth(x) for x in v), default=0)
    return 0


def max_scalar_depth(v):
    """Depth counting the innermost scalar as a level ({"a": 1} is 2)."""
    if isinstance(v, dict):
        return 1 + max((max_scalar_depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((max_scalar_depth(x) for x in v), default=0)
    return 1


def has_lone_surrogate(v):
    if isinstance(v, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in v)
    if isinstance(v, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(has_lone_surrogate(x) for x in v)
    return False


class StrictJsonError(Exception):
    pass


def _reject_constant(name):
    raise StrictJsonError("non-standard JSON literal %s" % name)


def parse_strict(text):
    """Parse as intentkey does: strict JSON (no NaN/Infinity, no lone surrogates,
    no raw control characters in strings). Duplicate names: the last wins."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, StrictJsonError) as exc:
        raise StrictJsonError(str(exc))
    if has_lone_surrogate(value):
        raise StrictJsonError("lone surrogate")
    return value


# ---------------------------------------------------------------------------
# The project model: policies and normalizers
# ---------------------------------------------------------------------------
class Fault(Exception):
    def __init__(self, code, why, path=None):
        assert code in ERROR_CODES, code
        super().__init__("%s: %s" % (code, why))
        self.code, self.why, self.path = code, why, path


DEFAULT_POLICY_JSON = {
    "version": 1,
    "name": "default",
    "bucketSeconds": 900,
    "keyHexLength": 64,
    "fields": {
        "creditor_key": {"class": "key", "normalizer": "pix-key"},
        "amount": {"class": "key", "normalizer": "decimal", "scale": 2, "rounding": "half-up"},
        "currency": {"class": "key", "normalizer": "currency"},
        "remittance": {"class": "key", "normalizer": "text"},
        "request_id": {"class": "ignored"},
        "attempt": {"class": "ignored"},
        "trace_id": {"class": "ignored"},
        "created_at": {"class": "ignored"},
        "user_agent": {"class": "ignored"},
    },
}

TOP_MEMBERS = ("version", "name", "bucketSeconds", "actionTypes", "keyHexLength", "fields")
CLASSES = ("key", "fingerprint", "ignored")
NORMALIZERS = ("text", "pix-key", "decimal", "currency", "integer", "exact")


class Policy:
    def __init__(self, bucket, key_len, action_types, fields):
        self.bucket, self.key_len, self.action_types, self.fields = bucket, key_len, action_types, fields


def policy_faults(p):
    """Every fault of a policy document, as (path, why). Empty list: valid."""
    out = []
    if not isinstance(p, dict):
        return [("", "the policy is not a JSON object")]
    for k in p:
        if k not in TOP_MEMBERS:
            out.append((k, "unknown member"))
    if "version" not in p:
        out.append(("version", "missing"))
    elif not is_int(p["version"]) or p["version"] != 1:
        out.append(("version", "must be 1"))
    if "name" in p and not isinstance(p["name"], str):
        out.append(("name", "not a string"))
    if "bucketSeconds" in p:
        b = p["bucketSeconds"]
        if not is_int(b) or not 1 <= b <= 31536000:
            out.append(("bucketSeconds", "integer 1..=31536000"))
    if "keyHexLength" in p:
        k = p["keyHexLength"]
        if not is_int(k) or not 32 <= k <= 64:
            out.append(("keyHexLength", "integer 32..=64"))
    if "actionTypes" in p:
        a = p["actionTypes"]
        if not isinstance(a, list) or not a:
            out.append(("actionTypes", "non-empty array"))
        else:
            seen = set()
            for i, item in enumerate(a):
                if not isinstance(item, str) or item == "" or item in seen:
                    out.append(("actionTypes.%d" % i, "non-empty unique string"))
                if isinstance(item, str):
                    seen.add(item)
    if "fields" not in p:
        out.append(("fields", "missing"))
    elif not isinstance(p["fields"], dict):
        out.append(("fields", "not an object"))
    else:
        for name, spec in p["fields"].items():
            path = "fields." + name
            if name == "":
                out.append((path, "empty field name"))
                continue
            if not isinstance(spec, dict):
                out.append((path, "field spec not an object"))
                continue
            if "class" not in spec:
                out.append((path + ".class", "missing"))
                continue
            cls = spec["class"]
            if cls not in CLASSES:
                out.append((path + ".class", "unknown class"))
                continue
            if cls != "key":
                for m in spec:
                    if m in ("normalizer", "scale", "rounding"):
                        raise GenError("ambiguous policy (member %r on a %s field): spec says nothing" % (m, cls))
                    if m != "class":
                        out.append((path + "." + m, "unknown member"))
                continue
            norm = spec.get("normalizer")
            for m in spec:
                if m not in ("class", "normalizer", "scale", "rounding"):
                    out.append((path + "." + m, "unknown member"))
                elif m in ("scale", "rounding") and norm != "decimal" and norm in NORMALIZERS:
                    raise GenError("ambiguous policy (%s on a %s field): spec says nothing" % (m, norm))
            if "normalizer" not in spec:
                out.append((path + ".normalizer", "a key field needs a normalizer"))
            elif norm not in NORMALIZERS:
                out.append((path + ".normalizer", "unknown normalizer"))
            elif norm == "decimal":
                if "scale" in spec and (not is_int(spec["scale"]) or not 0 <= spec["scale"] <= 18):
                    out.append((path + ".scale", "integer 0..=18"))
                if "rounding" in spec and spec["rounding"] != "half-up":
                    out.append((path + ".rounding", "only half-up"))
    return out


def load_policy(p):
    """The model's Policy for a valid document (None = the built-in default)."""
    if p is None:
        p = DEFAULT_POLICY_JSON
    faults = policy_faults(p)
    if faults:
        raise GenError("policy expected valid, model says %r" % faults)
    fields = {}
    for name, spec in p["fields"].items():
        if spec["class"] == "key":
            fields[name] = ("key", spec["normalizer"], spec.get("scale", 2))
        else:
            fields[name] = (spec["class"],)
    return Policy(p.get("bucketSeconds", 900), p.get("keyHexLength", 64), p.get("actionTypes"), fields)


def norm_decimal(raw, scale):
    """(value string, canonicalized?) or raises Fault."""
    if isinstance(raw, bool) or raw is None or isinstance(raw, (list, dict)):
        raise Fault("invalid-field-type", "amount must be a number or a string")
    if is_int(raw):
        text = str(raw)
    elif isinstance(raw, float):
        if raw != raw or raw in (float("inf"), float("-inf")):
            raise Fault("invalid-decimal", "the number overflows a double")
        text = str(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        if not DECIMAL_TEXT.fullmatch(text):
            raise Fault("invalid-decimal", "not decimal text: %r" % raw)
    else:
        raise GenError("unexpected amount type %r" % type(raw))
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise GenError("Decimal() cannot hold %r: the spec does not cover it" % text)
    ctx = Context(prec=28, rounding=ROUND_HALF_UP, Emin=-999999, Emax=999999, traps=[InvalidOperation])
    try:
        q = d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=ctx)
    except InvalidOperation:
        raise Fault("decimal-out-of-range", "needs more than 28 significant digits")
    # Plain fixed-point text at every scale (Python's str() would switch to
    # scientific form such as "1E-18" past scale 6; intentkey never does).
    s = format(q, "f")
    canon = False
    if q.is_zero() and q.is_signed():
        s, canon = format(q.copy_abs(), "f"), True
    if scale == 2:
        # Composition check: the oracle's own normalizer agrees (before -0 canonicalization).
        if ORACLE.normalize_amount(raw) != str(q):
            raise GenError("model decimal %r != oracle normalize_amount %r for %r" % (str(q), ORACLE.normalize_amount(raw), raw))
    return s, canon


def norm_field(normalizer, scale, raw):
    """(value, canonicalized?) or raises Fault."""
    if normalizer == "decimal":
        return norm_decimal(raw, scale)
    if normalizer == "integer":
        if isinstance(raw, bool) or raw is None or isinstance(raw, (list, dict)):
            raise Fault("invalid-field-type", "integer field must be a JSON integer or a string")
        if is_int(raw):
            return str(raw), False
        if isinstance(raw, float):
            raise Fault("invalid-integer", "JSON number with '.', 'e' or 'E'")
        if re.fullmatch(r"-?[0-9]+", raw):
            return str(int(raw)), False
        raise Fault("invalid-integer", "string is not ^-?[0-9]+$")
    if not isinstance(raw, str):
        raise Fault("invalid-field-type", "%s field must be a JSON string" % normalizer)
    if normalizer == "exact":
        return raw, False
    if normalizer == "text":
        return ORACLE.normalize_text(raw), False
    if normalizer == "currency":
        if not re.fullmatch(r"[A-Za-z]{3}", raw.strip()):
            raise Fault("invalid-currency", "not 3 ASCII letters: %r" % raw)
        return ORACLE.normalize_currency(raw), False
    if normalizer == "pix-key":
        stripped = raw.strip()
        if DOC_KEY.fullmatch(stripped) and any(c not in ASCII_DIGITS and c not in ".-/" for c in stripped):
            raise Fault("invalid-pix-key", "document key with non-ASCII digits")
        v = ORACLE.normalize_creditor_key(raw)
        if v == "":
            raise Fault("invalid-pix-key", "empty after normalization")
        return v, False
    raise GenError("unknown normalizer %s" % normalizer)


def model_body(policy, payload, fingerprint=False):
    """(body, canonicalized?, faults). Collects every fault, so a case can be checked
    to be wrong in exactly one way."""
    faults = []
    if not isinstance(payload, dict):
        return None, False, [Fault("invalid-payload", "payload is not a JSON object")]
    if container_depth(payload) > 100:
        faults.append(Fault("invalid-payload", "nested deeper than 100 levels"))
    unknown = sorted(set(payload) - set(policy.fields))
    if unknown:
        faults.append(Fault("unclassified-fields", "unclassified: %r" % unknown))
    body, canon = {}, False
    for name, spec in policy.fields.items():
        if name not in payload:
            continue
        if spec[0] == "key":
            try:
                v, c = norm_field(spec[1], spec[2], payload[name])
            except Fault as f:
                faults.append(f)
                continue
            body[name], canon = v, canon or c
        elif spec[0] == "fingerprint" and fingerprint:
            body[name] = payload[name]
    return body, canon, faults


def check_secret(secret, faults):
    if len(secret) < 32:
        faults.append(Fault("secret-too-short", "%d bytes" % len(secret)))


def check_identity(policy, tenant, action, faults):
    if not isinstance(tenant, str) or tenant == "":
        faults.append(Fault("invalid-tenant-id", "tenant_id must be a non-empty string"))
    if not isinstance(action, str) or action == "":
        faults.append(Fault("invalid-action-type", "action_type must be a non-empty string"))
    elif policy.action_types is not None and action not in policy.action_types:
        faults.append(Fault("unknown-action-type", "%r not in actionTypes" % action))


class Outcome:
    """What intentkey does with a case: valid (material, key, canonicalized) or the faults."""

    def __init__(self, faults, material=None, key=None, canon=False):
        self.faults, self.material, self.key, self.canon = faults, material, key, canon

    @property
    def valid(self):
        return not self.faults


def model_fields(policy, secret, tenant, action, payload_value, epoch):
    faults = []
    check_secret(secret, faults)
    check_identity(policy, tenant, action, faults)
    if not is_int(epoch) or not I64_MIN <= epoch <= I64_MAX:
        faults.append(Fault("invalid-epoch", "intent_epoch must be a JSON integer in i64"))
    body, canon, body_faults = model_body(policy, payload_value)
    faults += body_faults
    if faults:
        return Outcome(faults)
    material = canonical([tenant, action, body, epoch // policy.bucket])
    return Outcome([], material, mac(secret, material)[:policy.key_len], canon)


def run_oracle(secret, tenant, action, payload_value, epoch):
    """('accepted', material str, key) or ('raised', class name, message)."""
    try:
        material = ORACLE.derive_material(tenant, action, payload_value, epoch)
        key = ORACLE.derive_idempotency_key(secret, tenant, action, payload_value, epoch)
        return ("accepted", material.decode("utf-8"), key)
    except Exception as exc:  # the oracle reports every failure as data
        return ("raised", type(exc).__name__, str(exc))


# ---------------------------------------------------------------------------
# Cases and reconciliation
# ---------------------------------------------------------------------------
SECRET = hashlib.sha256(b"intentkey golden vector secret").digest()  # 32 bytes
TENANT = "tenant-acme"
ACTION = "pix.send"
EPOCH = 1732950000
BASE = {"creditor_key": "maria.silva@example.com", "amount": "150.00", "currency": "BRL",
        "remittance": "Aluguel de março"}
DROP = object()


def pl(**changes):
    """The base payload with some members replaced (DROP removes one)."""
    d = dict(BASE)
    for k, v in changes.items():
        if v is DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def js(obj, ascii=False):
    return json.dumps(obj, ensure_ascii=ascii)


def payload_with_raw(raw_amount_literal, **changes):
    """Payload text whose amount is the exact JSON literal text given."""
    d = pl(amount=0, **changes)
    text = js(d)
    marker = '"amount": 0'
    assert text.count(marker) == 1
    return text.replace(marker, '"amount": ' + raw_amount_literal)


class Case:
    """An annotated fields case. expect: "valid" or an error code. oracle: "accepts" or
    "raises" (invalid cases must say). oracle_error: optional expected exception name."""

    def __init__(self, comment, payload, expect="valid", oracle=None, flags=(), secret=SECRET,
                 tenant=TENANT, action=ACTION, epoch=EPOCH, oracle_error=None):
        if not isinstance(payload, str):
            payload = js(payload)
        self.comment, self.payload, self.expect, self.oracle = comment, payload, expect, oracle
        self.flags = list(flags)
        self.secret, self.tenant, self.action, self.epoch = secret, tenant, action, epoch
        self.oracle_error = oracle_error
        if expect == "valid":
            assert oracle in (None, "accepts"), comment
            self.oracle = "accepts"
        else:
            assert expect in ERROR_CODES, expect
            assert oracle in ("accepts", "raises", None), comment


def ok(comment, payload, flags=(), **kw):
    return Case(comment, payload, "valid", None, flags, **kw)


def bad(code, comment, payload, oracle, flags=(), **kw):
    return Case(comment, payload, code, oracle, flags, **kw)


def reconcile(case, outcome, oracle_result, where):
    """Checks annotation vs model vs oracle; returns the test's result members."""
    def fail(msg):
        raise GenError("%s: %r: %s" % (where, case.comment, msg))

    deviation_flags = [f for f in case.flags if FLAGS[f][0] == DEVIATION]
    canon_flags = [f for f in case.flags if FLAGS[f][0] == CANON]
    out = {}
    if case.expect == "valid":
        if not outcome.valid:
            fail("annotated valid but the model refuses: %s" % "; ".join(map(str, outcome.faults)))
        if deviation_flags:
            fail("valid case carries deviation flags %r" % deviation_flags)
        out["result"] = "valid"
        out["material"] = outcome.material.decode("utf-8")
        out["key"] = outcome.key
        if bool(outcome.canon) != bool(canon_flags):
            fail("canonicalization and its flag disagree (model canon=%s, flags %r)" % (outcome.canon, canon_flags))
        if oracle_result is not None:
            if oracle_result[0] != "accepted":
                fail("annotated 'oracle accepts' but the oracle raised %s: %s" % oracle_result[1:])
            same = oracle_result[1] == out["material"] and oracle_result[2] == out["key"]
            if outcome.canon:
                if same:
                    fail("flagged canonicalization but the oracle's material is identical")
                out["oracleKey"] = oracle_result[2]
                out["oracleMaterial"] = oracle_result[1]
            elif not same:
                fail("model and oracle disagree:\n  model  %r\n  oracle %r" % (out["material"], oracle_result[1]))
        return out
    # invalid
    if outcome.valid:
        fail("annotated %s but the model accepts" % case.expect)
    codes = [f.code for f in outcome.faults]
    if len(codes) != 1:
        fail("invalid case must be wrong in exactly one way; model faults: %s" % "; ".join(map(str, outcome.faults)))
    if codes[0] != case.expect:
        fail("annotated %s but the model says %s" % (case.expect, outcome.faults[0]))
    if canon_flags:
        fail("invalid case carries a canonicalization flag")
    out["result"] = "invalid"
    out["expectedError"] = case.expect
    if oracle_result is None and deviation_flags:
        fail("a deviation flag needs the oracle's result recorded")
    if oracle_result is not None:
        if case.oracle == "raises":
            if oracle_result[0] != "raised":
                fail("annotated 'oracle raises' but the oracle accepted (material %r)" % oracle_result[1])
            if case.oracle_error and oracle_result[1] != case.oracle_error:
                fail("annotated oracle error %s, the oracle raised %s" % (case.oracle_error, oracle_result[1]))
            if deviation_flags:
                fail("deviation flag on a case the oracle refuses too")
            out["oracleError"] = oracle_result[1]
        else:
            if oracle_result[0] != "accepted":
                fail("annotated 'oracle accepts' but the oracle raised %s: %s" % oracle_result[1:])
            if not deviation_flags:
                fail("the oracle accepts a refused case: it needs a deviation flag")
            out["oracleKey"] = oracle_result[2]
            out["oracleMaterial"] = oracle_result[1]
    return out


def fields_test(case, policy=None, policy_obj=None, use_oracle=True, where=""):
    pol = load_policy(policy_obj) if policy is None else policy
    try:
        value = parse_strict(case.payload)
    except StrictJsonError as exc:
        raise GenError("%s: %r: payload text is not strict JSON: %s" % (where, case.comment, exc))
    outcome = model_fields(pol, case.secret, case.tenant, case.action, value, case.epoch)
    oracle_result = None
    if use_oracle:
        oracle_result = run_oracle(case.secret, case.tenant, case.action, json.loads(case.payload), case.epoch)
    elif case.expect != "valid" and case.oracle is not None:
        raise GenError("%s: %r: a spec-only case cannot claim oracle behaviour" % (where, case.comment))
    if use_oracle and case.expect != "valid" and case.oracle is None:
        raise GenError("%s: %r: an invalid case must say whether the oracle accepts or raises" % (where, case.comment))
    if not -(2 ** 53) <= case.epoch <= 2 ** 53:
        raise GenError("%s: %r: intentEpoch outside +-2^53" % (where, case.comment))
    t = {"comment": case.comment, "flags": case.flags, "secretHex": case.secret.hex(),
         "tenantId": case.tenant, "actionType": case.action, "payload": case.payload,
         "intentEpoch": case.epoch}
    t.update(reconcile(case, outcome, oracle_result, where))
    return t


# ---------------------------------------------------------------------------
# File assembly
# ---------------------------------------------------------------------------
def build_file(algorithm, header, groups):
    tc = 0
    used = set()
    valid = invalid = 0
    out_groups = []
    for g in groups:
        tests = []
        for t in g.pop("tests"):
            tc += 1
            t = dict(t)
            flags = t.pop("flags", [])
            for f in flags:
                if f not in FLAGS:
                    raise GenError("undefined flag %s" % f)
            used.update(flags)
            r = t["result"]
            valid += r == "valid"
            invalid += r == "invalid"
            if r == "invalid" and t.get("expectedError") not in ERROR_CODES:
                raise GenError("bad expectedError in %r" % t)
            ordered = {"tcId": tc, "comment": t.pop("comment"), "flags": flags}
            ordered.update(t)
            tests.append(ordered)
        if not tests:
            raise GenError("empty group %r" % g.get("comment"))
        ng = {"type": g.pop("type"), "comment": g.pop("comment"), "source": g.pop("source")}
        ng.update(g)
        ng["tests"] = tests
        out_groups.append(ng)
    doc = {"schema": SCHEMA, "algorithm": algorithm, "generatorVersion": GENERATOR_VERSION,
           "numberOfTests": tc, "header": header, "notes": notes_for(used), "testGroups": out_groups}
    return doc, (tc, valid, invalid)


def group(type_, comment, source, tests, **extra):
    g = {"type": type_, "comment": comment, "source": source}
    g.update(extra)
    g["tests"] = tests
    return g


# ---------------------------------------------------------------------------
# File 6: uuid
# ---------------------------------------------------------------------------
def file_uuid():
    randoms = [("all-zero random bytes", bytes(16)), ("all-0xff random bytes", b"\xff" * 16),
               ("bytes 00..0f", bytes(range(16))), ("bytes f0..ff", bytes(range(0xF0, 0x100))),
               ("alternating 0x55", b"\x55" * 16), ("alternating 0xaa", b"\xaa" * 16),
               ("version nibble already 4, variant already 10", bytes.fromhex("00000000000040008000000000000000")),
               ("version nibble 0xf, variant bits 11", bytes.fromhex("ffffffffffffffffcfffffffffffffff")),
               ("version nibble 1 (v1 pattern) forced to 4", bytes.fromhex("123456789abc1def0123456789abcdef"))]
    for i in range(len(randoms), 20):
        randoms.append(("pseudo-random bytes #%d (sha256 of 'uuid-%d')" % (i, i),
                        hashlib.sha256(b"uuid-%d" % i).digest()[:16]))
    tests = []
    for comment, b in randoms:
        key = uuid.UUID(bytes=b, version=4).hex
        assert len(key) == 32 and key[12] == "4" and key[16] in "89ab"
        tests.append({"comment": comment, "flags": ["UuidV4"], "randomHex": b.hex(),
                      "result": "valid", "key": key})
    header = ["UUID v4 keys from 16 random bytes supplied by the host.",
              "key = uuid.UUID(bytes=randomHex, version=4).hex: byte 6 high nibble set to 4, byte 8 top bits set to 10, 32 lowercase hex, no dashes."]
    return build_file("intentkey-uuid-v4", header,
                      [group("UuidV4", "uuid keys: version and variant bits forced over host randomness", "spec", tests)])


# ---------------------------------------------------------------------------
# File 1: fields with the default policy
# ---------------------------------------------------------------------------
def f1_basic():
    return [
        ok("base payload: e-mail pix key, string amount, BRL, Portuguese remittance", pl(), ["Basic"]),
        ok("only an amount", {"amount": "1.00"}, ["Basic"]),
        ok("amount as JSON integer 150 (same key as \"150.00\")", pl(amount=150), ["Basic"]),
        ok("amount as JSON number 150.0 (same key as \"150.00\")", payload_with_raw("150.0"), ["Basic", "FloatAmount"]),
        ok("tenant and action with non-ASCII letters", pl(), ["Basic"], tenant="inquilino-çã", action="pagamento.pix"),
        ok("CPF pix key, integer amount, USD, empty remittance", {"creditor_key": "123.456.789-09", "amount": 7, "currency": "USD", "remittance": ""}, ["Basic"]),
        ok("empty remittance is fine", pl(remittance=""), ["Basic"]),
        ok("compact payload text without spaces", json.dumps(BASE, ensure_ascii=False, separators=(",", ":")), ["Basic"]),
        ok("pretty-printed payload text with newlines and indentation", json.dumps(BASE, ensure_ascii=False, indent=2), ["Basic"]),
        ok("payload text with every non-ASCII character escaped as \\uXXXX", js(BASE, ascii=True), ["Basic"]),
    ]


def f1_secrets():
    cases = []
    for n in (32, 33, 64, 100):
        sec = hashlib.sha256(b"secret-%d" % n).digest() * 4
        cases.append(ok("secret of %d bytes is accepted" % n, pl(), ["SecretLength"], secret=sec[:n]))
    for n in (0, 1, 16, 31):
        sec = hashlib.sha256(b"secret-%d" % n).digest()[:n]
        cases.append(bad("secret-too-short", "secret of %d bytes is refused (oracle keys HMAC with it)" % n, pl(), "accepts", ["ShortSecret"], secret=sec))
    return cases


def f1_identity():
    return [
        bad("invalid-tenant-id", "empty tenant_id", pl(), "accepts", ["EmptyTenantId"], tenant=""),
        bad("invalid-action-type", "empty action_type", pl(), "accepts", ["EmptyActionType"], action=""),
        ok("tenant_id of one space is not empty (no strip on identifiers)", pl(), ["Basic"], tenant=" "),
        ok("action_type with edge spaces is kept verbatim", pl(), ["Basic"], action=" pix.send "),
        ok("tenant_id in upper case is not folded", pl(), ["Basic"], tenant="TENANT-ACME"),
    ]


def f1_whitespace(field):
    cases = []
    for i, c in enumerate(WHITESPACE):
        if field == "remittance":
            p = pl(remittance=c + "Aluguel de março" + c)
            payload = js(p)
        elif field == "creditor_key":
            k = "123.456.789-09" if i % 2 == 0 else "Maria.Silva@Example.com"
            p = pl(creditor_key=c + k + c)
            payload = js(p, ascii=(i % 3 == 0))
        elif field == "currency":
            p = pl(currency=c + "brl" + c)
            payload = js(p, ascii=(i % 2 == 1))
        else:
            p = pl(amount=c + "10.5" + c)
            payload = js(p, ascii=(i % 2 == 0))
        what = {"creditor_key": "creditor_key %r" % (p["creditor_key"].strip(),),
                "currency": "currency \"brl\"", "amount": "amount string \"10.5\"",
                "remittance": "remittance"}[field]
        cases.append(ok("%s with %s at both ends" % (what, uname(c)), payload, ["PythonWhitespace"]))
    return cases


def f1_whitespace_extra():
    allws = "".join(WHITESPACE)
    return [
        ok("remittance with all 29 Python whitespace characters at both ends", pl(remittance=allws + "Aluguel" + allws[::-1]), ["PythonWhitespace"]),
        ok("remittance with all 29 whitespace characters in the middle (kept)", pl(remittance="a" + allws + "b"), ["PythonWhitespace", "JsonEscaping"]),
        ok("remittance that is only whitespace becomes empty", pl(remittance=allws), ["PythonWhitespace"]),
        ok("remittance with U+200B ZERO WIDTH SPACE at both ends (not whitespace: kept)", pl(remittance="\u200bAluguel\u200b"), ["NotWhitespace"]),
        ok("remittance with U+FEFF ZERO WIDTH NO-BREAK SPACE at both ends (kept)", pl(remittance="\ufeffAluguel\ufeff"), ["NotWhitespace"]),
        ok("remittance with U+180E MONGOLIAN VOWEL SEPARATOR at both ends (not whitespace since Unicode 6.3: kept)", pl(remittance="\u180eAluguel\u180e"), ["NotWhitespace"]),
        ok("creditor_key CPF with U+200B at the start: not a document key, kept and folded", pl(creditor_key="\u200b123.456.789-09"), ["NotWhitespace", "PixKeyForm"]),
        ok("creditor_key e-mail with U+FEFF at the end (kept)", pl(creditor_key="Maria@Example.com\ufeff"), ["NotWhitespace", "PixKeyForm"]),
        bad("invalid-currency", "currency \"BRL\" with U+200B at the start (not stripped, so not 3 letters)", pl(currency="\u200bBRL"), "accepts", ["NotWhitespace", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"BRL\" with U+FEFF at the end", pl(currency="BRL\ufeff"), "accepts", ["NotWhitespace", "CurrencyNotThreeLetters"]),
        bad("invalid-decimal", "amount string \"10.5\" with U+200B at the start", pl(amount="\u200b10.5"), "raises", ["NotWhitespace", "MalformedDecimal"], oracle_error="InvalidOperation"),
        bad("invalid-decimal", "amount string \"10.5\" with U+FEFF at the end", pl(amount="10.5\ufeff"), "raises", ["NotWhitespace", "MalformedDecimal"], oracle_error="InvalidOperation"),
        ok("amount string with mixed edge whitespace \\t U+3000 U+0085", pl(amount="\t\u3000\x85 10.5\x85\u3000\t"), ["PythonWhitespace"]),
    ]


def f1_casefold():
    items = [
        ("ß U+00DF LATIN SMALL LETTER SHARP S folds to \"ss\"", "Straße"),
        ("ẞ U+1E9E LATIN CAPITAL LETTER SHARP S folds to \"ss\"", "STRAẞE"),
        ("ﬁ U+FB01 LATIN SMALL LIGATURE FI folds to \"fi\"", "ﬁnanças"),
        ("ﬀ U+FB00 LATIN SMALL LIGATURE FF folds to \"ff\"", "oﬀ"),
        ("\"ΣΑΣ\" folds to \"σασ\" (lowercase would give \"σας\")", "ΣΑΣ"),
        ("ς U+03C2 GREEK SMALL LETTER FINAL SIGMA folds to σ", "λόγος"),
        ("İ U+0130 LATIN CAPITAL LETTER I WITH DOT ABOVE folds to i + U+0307", "İstanbul"),
        ("ı U+0131 LATIN SMALL LETTER DOTLESS I does not fold", "ılık"),
        ("Cherokee capital U+13A0 folds to itself", "\u13a0\u13a1"),
        ("Cherokee small U+AB70 folds to capital U+13A0", "\uab70\uab71"),
        ("Cherokee small U+13F8 folds to capital U+13F0", "\u13f8\u13f9"),
        ("ǅ U+01C5 titlecase digraph folds to ǆ U+01C6", "ǅemal"),
        ("µ U+00B5 MICRO SIGN folds to μ U+03BC", "5 µg"),
        ("ſ U+017F LATIN SMALL LETTER LONG S folds to s", "ſtraſſe"),
        ("K U+212A KELVIN SIGN folds to k", "300 \u212a"),
        ("ǰ U+01F0 folds to j + U+030C (result is not NFC)", "\u01f0"),
        ("ΐ U+0390 folds to three code points", "\u0390"),
        ("ŉ U+0149 folds to ʼn", "\u0149"),
        ("Ω U+2126 OHM SIGN: NFC gives Ω U+03A9, folds to ω", "\u2126"),
        ("mixed case ASCII \"AlUgUeL\"", "AlUgUeL"),
        ("Turkish dotted capital İ followed by combining dot", "I\u0307"),
    ]
    cases = [ok("remittance with " + c, pl(remittance=t), ["CaseFolding"]) for c, t in items]
    cases += [
        ok("creditor_key e-mail \"Straße@Example.de\" folds to \"strasse@example.de\"", pl(creditor_key="Straße@Example.de"), ["CaseFolding", "PixKeyForm"]),
        ok("creditor_key e-mail \"STRASSE@EXAMPLE.DE\" folds to the same as \"Straße@Example.de\"", pl(creditor_key="STRASSE@EXAMPLE.DE"), ["CaseFolding", "PixKeyForm"]),
        ok("creditor_key with KELVIN SIGN \"\u212aey@x.com\"", pl(creditor_key="\u212aey@x.com"), ["CaseFolding", "PixKeyForm"]),
        ok("creditor_key Greek \"ΣΑΣ@x.gr\"", pl(creditor_key="ΣΑΣ@x.gr"), ["CaseFolding", "PixKeyForm"]),
    ]
    return cases


def f1_nfc():
    items = [
        ("e + U+0301 COMBINING ACUTE composes to é", "cafe\u0301"),
        ("precomposed é U+00E9", "caf\u00e9"),
        ("A + U+030A COMBINING RING ABOVE composes to Å U+00C5", "A\u030angstr\u00f6m"),
        ("precomposed Å U+00C5", "\u00c5ngstr\u00f6m"),
        ("Å U+212B ANGSTROM SIGN (singleton) becomes U+00C5", "\u212bngstr\u00f6m"),
        ("a + U+0323 + U+0302 composes to ậ U+1EAD", "a\u0323\u0302"),
        ("a + U+0302 + U+0323 is reordered and composes to ậ U+1EAD", "a\u0302\u0323"),
        ("precomposed ậ U+1EAD", "\u1ead"),
        ("Hangul jamo L+V+T U+1100 U+1161 U+11A8 compose to 각 U+AC01", "\u1100\u1161\u11a8"),
        ("Hangul jamo L+V U+1100 U+1161 compose to 가 U+AC00", "\u1100\u1161"),
        ("precomposed Hangul 각 U+AC01", "\uac01"),
        ("composition exclusion: U+0958 DEVANAGARI LETTER QA decomposes to U+0915 U+093C", "\u0958"),
        ("composition exclusion: U+2ADC FORKING decomposes to U+2ADD U+0338", "\u2adc"),
        ("composition exclusion: U+FB1D HEBREW LETTER YOD WITH HIRIQ decomposes", "\ufb1d"),
        ("U+0344 COMBINING GREEK DIALYTIKA TONOS decomposes to U+0308 U+0301", "a\u0344"),
        ("ẛ + U+0323: NFC then fold gives ṩ U+1E69", "\u1e9b\u0323"),
        ("space + U+0301 at the start: strip removes the space, leaving a bare combining mark", " \u0301abc"),
        ("ç spelled c + U+0327 COMBINING CEDILLA", "Aluguel de mar\u0063\u0327o"),
    ]
    cases = [ok("remittance " + c, pl(remittance=t), ["Nfc"]) for c, t in items]
    cases += [
        ok("creditor_key \"E\u0301@x.com\" with a combining acute: pix-key does no NFC, folds only", pl(creditor_key="E\u0301@x.com"), ["Nfc", "PixKeyForm"]),
        ok("creditor_key \"\u00c9@x.com\" precomposed: a different key from the combining form", pl(creditor_key="\u00c9@x.com"), ["Nfc", "PixKeyForm"]),
    ]
    return cases


def f1_escaping():
    cases = []
    for o in range(0x20):
        c = chr(o)
        cases.append(ok("remittance with %s in the middle" % uname(c), pl(remittance="Alu" + c + "guel"), ["JsonEscaping"]))
    for o in range(0x20):
        c = chr(o)
        cases.append(ok("tenant_id and action_type with %s in the middle" % uname(c), pl(), ["JsonEscaping"],
                        tenant="tenant" + c + "acme", action="pix" + c + "send"))
    cases += [
        ok("remittance with U+007F DELETE in the middle (not escaped)", pl(remittance="Alu\x7fguel"), ["JsonEscaping"]),
        ok("remittance with U+0080 and U+009F C1 controls in the middle (not escaped)", pl(remittance="Alu\x80\x9fguel"), ["JsonEscaping"]),
        ok("remittance with U+2028 LINE SEPARATOR in the middle (not escaped)", pl(remittance="Alu\u2028guel"), ["JsonEscaping"]),
        ok("remittance with U+2029 PARAGRAPH SEPARATOR in the middle (not escaped)", pl(remittance="Alu\u2029guel"), ["JsonEscaping"]),
        ok("remittance with a quotation mark '\"'", pl(remittance="Aluguel \"março\""), ["JsonEscaping"]),
        ok("remittance with a backslash '\\\\'", pl(remittance="C:\\aluguel\\marco"), ["JsonEscaping"]),
        ok("remittance with '/' written as the escape \\/ in the payload text (not escaped in the material)",
           js(pl(remittance="PLACEHOLDER")).replace("PLACEHOLDER", "aluguel\\/mar\\u00e7o"), ["JsonEscaping"]),
        ok("tenant_id with '\"', '\\\\' and '/'", pl(), ["JsonEscaping"], tenant="a\"b\\c/d"),
        ok("remittance with U+00A0 NO-BREAK SPACE in the middle (kept, not escaped)", pl(remittance="Alu\xa0guel"), ["JsonEscaping"]),
        ok("remittance with U+FFFF noncharacter in the middle", pl(remittance="Alu\uffffguel"), ["JsonEscaping"]),
    ]
    return cases


def f1_astral():
    return [
        ok("remittance with emoji U+1F600 GRINNING FACE", pl(remittance="Aluguel \U0001F600"), ["AstralChars"]),
        ok("remittance with emoji written as a surrogate-pair escape in the payload text", js(pl(remittance="Aluguel \U0001F600"), ascii=True), ["AstralChars"]),
        ok("remittance with U+1D518 MATHEMATICAL FRAKTUR CAPITAL U (no fold, no NFC change)", pl(remittance="\U0001D518ber"), ["AstralChars"]),
        ok("remittance with Deseret U+10400 (folds to U+10428)", pl(remittance="\U00010400\U00010401"), ["AstralChars", "CaseFolding"]),
        ok("remittance with Osage U+104B0 (folds to U+104D8)", pl(remittance="\U000104B0"), ["AstralChars", "CaseFolding"]),
        ok("remittance with Adlam U+1E900 (folds to U+1E922)", pl(remittance="\U0001E900"), ["AstralChars", "CaseFolding"]),
        ok("remittance with Old Hungarian U+10C80 (folds to U+10CC0)", pl(remittance="\U00010C80"), ["AstralChars", "CaseFolding"]),
        ok("remittance with a ZWJ family emoji sequence", pl(remittance="\U0001F468\u200d\U0001F469\u200d\U0001F467"), ["AstralChars"]),
        ok("remittance with regional indicators (flag of Brazil)", pl(remittance="\U0001F1E7\U0001F1F7"), ["AstralChars"]),
        ok("creditor_key e-mail with Deseret capital (folds)", pl(creditor_key="\U00010400@x.com"), ["AstralChars", "CaseFolding", "PixKeyForm"]),
        ok("tenant_id and action_type with astral characters (not folded)", pl(), ["AstralChars"], tenant="\U0001F600-\U00010400", action="\U0001D518"),
    ]


def f1_floats():
    lits = [
        ("1.005", "1.01: str(float) is \"1.005\", then half-up (toFixed would say 1.00)"),
        ("2.675", "2.68 (binary value is below .675; the decimal text is not)"),
        ("0.125", "0.13"), ("0.135", "0.14"), ("1.115", "1.12"), ("0.015", "0.02"), ("0.005", "0.01"),
        ("10.0", "10.00"), ("1e2", "100.00 (float 100.0)"), ("1E2", "100.00 (upper-case exponent)"),
        ("1.5e-3", "0.00"), ("0.30000000000000004", "0.30"), ("1e16", "str(float) is \"1e+16\": 10000000000000000.00"),
        ("1e22", "10000000000000000000000.00"), ("5e-324", "smallest subnormal: 0.00"),
        ("123456789.125", "123456789.13"), ("-1.005", "-1.01"), ("-2.675", "-2.68"),
        ("1.0050", "trailing zero in the literal: float 1.005, 1.01"),
        ("1.23456789012345678", "more digits than a double holds: str gives 1.2345678901234568"),
        ("9007199254740993.0", "2^53+1 as a float rounds to 9007199254740992"),
        ("1000000000000000.5", "exactly representable: 1000000000000000.50"),
        ("0.0", "0.00"), ("1e-50", "0.00"), ("2.5E+1", "25.00"), ("-1.5e-1", "-0.15"),
        ("1.7976931348623157e-308", "tiny normal double: 0.00"), ("149.995", "150.00"),
    ]
    cases = [ok("amount JSON number %s -> %s" % (lit, why), payload_with_raw(lit), ["FloatAmount"]) for lit, why in lits]
    for c in cases[:7] + cases[16:18]:
        c.flags.append("HalfUpRounding")
    cases += [
        bad("decimal-out-of-range", "amount JSON number 1.7976931348623157e308 (largest double) needs 311 digits",
            payload_with_raw("1.7976931348623157e308"), "raises", ["FloatAmount", "Precision28"], oracle_error="InvalidOperation"),
        bad("decimal-out-of-range", "amount JSON number 1e27 needs 30 digits", payload_with_raw("1e27"), "raises", ["FloatAmount", "Precision28"], oracle_error="InvalidOperation"),
        bad("invalid-decimal", "amount JSON number 1e400 overflows the double (Python reads inf)", payload_with_raw("1e400"), "raises", ["FloatAmount", "MalformedDecimal"], oracle_error="InvalidOperation"),
        bad("invalid-decimal", "amount JSON number -1e400 overflows the double (Python reads -inf)", payload_with_raw("-1e400"), "raises", ["FloatAmount", "MalformedDecimal"], oracle_error="InvalidOperation"),
        ok("amount JSON number -0.0 gives -0.00, canonicalized to 0.00", payload_with_raw("-0.0"), ["FloatAmount", "NegativeZeroCanonicalized"]),
        ok("amount JSON number -0.004 gives -0.00, canonicalized to 0.00", payload_with_raw("-0.004"), ["FloatAmount", "NegativeZeroCanonicalized"]),
        ok("amount JSON number -1e-50 gives -0.00, canonicalized to 0.00", payload_with_raw("-1e-50"), ["FloatAmount", "NegativeZeroCanonicalized"]),
    ]
    return cases


def f1_integers():
    n26 = "9" * 26
    return [
        ok("amount JSON integer 10 -> 10.00", payload_with_raw("10"), ["IntegerAmount"]),
        ok("amount JSON integer 0", payload_with_raw("0"), ["IntegerAmount"]),
        ok("amount JSON integer literal -0 is Python int 0: 0.00, no canonicalization needed", payload_with_raw("-0"), ["IntegerAmount"]),
        ok("amount JSON integer -150", payload_with_raw("-150"), ["IntegerAmount"]),
        ok("amount JSON integer 9007199254740993 (2^53+1) kept exactly", payload_with_raw("9007199254740993"), ["IntegerAmount"]),
        ok("amount JSON integer 18446744073709551616 (2^64) kept exactly", payload_with_raw("18446744073709551616"), ["IntegerAmount"]),
        ok("amount JSON integer with 26 nines: 28 digits after quantize, the largest that fits", payload_with_raw(n26), ["IntegerAmount", "Precision28"]),
        ok("amount JSON integer with 26 nines, negative", payload_with_raw("-" + n26), ["IntegerAmount", "Precision28"]),
        bad("decimal-out-of-range", "amount JSON integer 10**26 needs 29 digits", payload_with_raw(str(10 ** 26)), "raises", ["IntegerAmount", "Precision28"], oracle_error="InvalidOperation"),
        bad("decimal-out-of-range", "amount JSON integer -10**26", payload_with_raw(str(-10 ** 26)), "raises", ["IntegerAmount", "Precision28"], oracle_error="InvalidOperation"),
        bad("decimal-out-of-range", "amount JSON integer 10**30", payload_with_raw(str(10 ** 30)), "raises", ["IntegerAmount", "Precision28"], oracle_error="InvalidOperation"),
        bad("decimal-out-of-range", "amount JSON integer 123456789012345678901234567890 (30 digits)", payload_with_raw("123456789012345678901234567890"), "raises", ["IntegerAmount", "Precision28"], oracle_error="InvalidOperation"),
        ok("amount string with 26 nines and .99: exactly 28 digits", pl(amount=n26 + ".99"), ["DecimalString", "Precision28"]),
        ok("amount string 26 nines .994 rounds down to 28 digits", pl(amount=n26 + ".994"), ["DecimalString", "Precision28", "HalfUpRounding"]),
        bad("decimal-out-of-range", "amount string 26 nines .995 rounds up to 10**26: 29 digits", pl(amount=n26 + ".995"), "raises", ["DecimalString", "Precision28", "HalfUpRounding"], oracle_error="InvalidOperation"),
        bad("decimal-out-of-range", "amount string with 27 digits \"123456789012345678901234567\"", pl(amount="123456789012345678901234567"), "raises", ["DecimalString", "Precision28"], oracle_error="InvalidOperation"),
        bad("decimal-out-of-range", "amount string with 27 nines", pl(amount="9" * 27), "raises", ["DecimalString", "Precision28"], oracle_error="InvalidOperation"),
        ok("amount string with 40 significant digits that quantizes to fewer than 28", pl(amount="1234567890.123456789012345678901234567890"), ["DecimalString", "Precision28"]),
    ]


def f1_string_amounts():
    valid = [
        (" 10.5 ", "ASCII spaces stripped: 10.50"), ("+1", "explicit plus sign: 1.00"), (".5", "no integer digits: 0.50"),
        ("5.", "no fraction digits: 5.00"), ("1e2", "exponent: 100.00"), ("1E+2", "upper-case exponent with sign: 100.00"),
        ("0.005", "half-up: 0.01"), ("0.0049999999999999999999999999999", "just below half: 0.00"),
        ("1e-50", "0.00"), ("-0.005", "half-up away from zero: -0.01"), ("00010.10", "leading zeros: 10.10"),
        ("1.005", "exact decimal text: 1.01"), ("2.675", "2.68"), ("10", "10.00"), ("10.00", "10.00"), ("10.0", "10.00"),
        ("-1.5e-1", "-0.15"), ("0e5", "0.00"), ("+.5e1", "5.00"), ("1e-999999", "tiny exponent: 0.00"),
        ("123.456", "123.46"), ("-123.454", "-123.45"),
    ]
    cases = [ok("amount string %s -> %s" % (json.dumps(s), why), pl(amount=s), ["DecimalString"]) for s, why in valid]
    for c in cases:
        if "half" in c.comment or "0.005" in c.comment:
            c.flags.append("HalfUpRounding")
    canon = [("-0", "\"-0\""), ("-0.001", "\"-0.001\""), ("-0.004", "\"-0.004\""), ("-0.00", "\"-0.00\""), ("-0e5", "\"-0e5\"")]
    cases += [ok("amount string %s gives -0.00, canonicalized to 0.00" % d, pl(amount=s), ["DecimalString", "NegativeZeroCanonicalized"]) for s, d in canon]
    cases += [
        bad("decimal-out-of-range", "amount string \"1e30\"", pl(amount="1e30"), "raises", ["DecimalString", "Precision28"], oracle_error="InvalidOperation"),
        bad("decimal-out-of-range", "amount string \"1e999999\"", pl(amount="1e999999"), "raises", ["DecimalString", "Precision28"], oracle_error="InvalidOperation"),
    ]
    raises = [("", "empty string"), ("   ", "only spaces"), ("abc", "letters"), ("1.2.3", "two dots"), ("1e", "exponent without digits"),
              ("e5", "exponent without mantissa"), (".", "a lone dot"), ("+", "a lone sign"), ("--1", "two signs"),
              ("1,50", "decimal comma"), ("10.5abc", "trailing letters"), ("0x10", "hexadecimal"), ("1 000", "inner space"),
              ("sNaN", "signaling NaN (quantize raises)"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"),
              ("inf", "inf"), ("+Inf", "+Inf"), ("²", "U+00B2 SUPERSCRIPT TWO (a digit but not decimal)"), ("½", "U+00BD VULGAR FRACTION ONE HALF"),
              ("1e+", "exponent sign without digits"), ("1\u00a0000", "inner U+00A0 NO-BREAK SPACE")]
    cases += [bad("invalid-decimal", "amount string %s: %s" % (json.dumps(s, ensure_ascii=False), why), pl(amount=s), "raises", ["MalformedDecimal"], oracle_error="InvalidOperation") for s, why in raises]
    accepts = [("NaN", "NanAmount", "the oracle hashes \"NaN\""), ("nan", "NanAmount", "lower-case; the oracle hashes \"NaN\""),
               ("-NaN", "NanAmount", "the oracle hashes \"-NaN\""), ("NaN123", "NanAmount", "NaN with diagnostic digits; the oracle hashes \"NaN123\""),
               (" NaN ", "NanAmount", "NaN with spaces"),
               ("1_000", "UnderscoreDigits", "Python reads 1000"), ("1_000.50", "UnderscoreDigits", "Python reads 1000.50"),
               ("١٠", "NonAsciiDigits", "ARABIC-INDIC digits; Python reads 10"), ("１０", "NonAsciiDigits", "FULLWIDTH digits; Python reads 10"),
               ("१०.५", "NonAsciiDigits", "DEVANAGARI digits; Python reads 10.5"), ("1٠", "NonAsciiDigits", "ASCII 1 then ARABIC-INDIC zero"),
               ("𝟏𝟎", "NonAsciiDigits", "MATHEMATICAL BOLD digits (astral)")]
    cases += [bad("invalid-decimal", "amount string %s: %s" % (json.dumps(s, ensure_ascii=False), why), pl(amount=s), "accepts", [flag, "MalformedDecimal"]) for s, flag, why in accepts]
    return cases


def f1_field_types():
    cases = []
    for lit, what in [("true", "true"), ("false", "false"), ("null", "null"), ("[]", "an empty array"), ("[10]", "an array [10]"), ("{}", "an empty object"), ("{\"value\": 10}", "an object")]:
        cases.append(bad("invalid-field-type", "amount is JSON %s" % what, payload_with_raw(lit), "raises", ["FieldType"], oracle_error="InvalidOperation"))
    for field, base_ok in [("remittance", None), ("creditor_key", None), ("currency", None)]:
        for lit, what in [(5, "the number 5"), (1.5, "the number 1.5"), (None, "null"), (True, "true"), ([], "an empty array"), (["x"], "an array of a string"), ({}, "an empty object")]:
            if field == "currency" and lit == 5:
                lit, what = 986, "the number 986 (ISO numeric code of BRL)"
            if field == "creditor_key" and lit == 5:
                lit, what = 12345678909, "the number 12345678909 (CPF digits)"
            cases.append(bad("invalid-field-type", "%s is JSON %s" % (field, what), pl(**{field: lit}), "raises", ["FieldType"]))
    return cases


def f1_bucket():
    epochs = [(0, "epoch 0: bucket 0"), (899, "epoch 899: last second of bucket 0"), (900, "epoch 900: first second of bucket 1"),
              (901, "epoch 901: bucket 1"), (1799, "epoch 1799: bucket 1"), (1800, "epoch 1800: bucket 2"),
              (-1, "epoch -1: floor gives bucket -1 (truncation would give 0)"), (-899, "epoch -899: bucket -1"),
              (-900, "epoch -900: bucket -1"), (-901, "epoch -901: bucket -2"), (-1800, "epoch -1800: bucket -2"),
              (1732950000, "epoch 1732950000: bucket 1925500 (exact multiple)"), (1732950899, "epoch 1732950899: bucket 1925500"),
              (1732949999, "epoch 1732949999: bucket 1925499"),
              (2 ** 53, "epoch 2^53"), (-(2 ** 53), "epoch -2^53: floor"), (2 ** 53 - 1, "epoch 2^53-1"),
              (4102444800, "epoch 4102444800 (year 2100)"), (-62135596800, "epoch -62135596800 (year 1)")]
    return [ok(c, pl(), ["BucketBoundary"], epoch=e) for e, c in epochs]


IGNORED = ["request_id", "attempt", "trace_id", "created_at", "user_agent"]


def nested(depth_containers, innermost):
    v = innermost
    for _ in range(depth_containers):
        v = [v]
    return v


def f1_ignored():
    cases = []
    values = [("a string", "req-123"), ("a nested object", {"a": {"b": [1, 2.5, None, True]}}), ("a float", 1.5),
              ("null", None), ("an array", [1, "two", 3.0]), ("an integer", 3)]
    for i, name in enumerate(IGNORED):
        for j, (what, v) in enumerate(values):
            if (i + j) % 2 == 0 or j == 0:
                cases.append(ok("ignored field %s with %s (same key as the base payload)" % (name, what), pl(**{name: v}), ["IgnoredField"]))
    cases += [
        ok("all five ignored fields at once", pl(request_id="r1", attempt=2, trace_id="t", created_at="2024-11-30T07:00:00Z", user_agent="curl/8"), ["IgnoredField"]),
        ok("only ignored fields (empty body)", {"request_id": "r1", "attempt": 7}, ["IgnoredField", "MissingField"]),
        ok("ignored field attempt with a float literal longer than a double holds (1.0000000000000000000001)", payload_text_with(pl(), "attempt", "1.0000000000000000000001"), ["IgnoredField"]),
        ok("ignored field attempt with a string \"NaN\"", pl(attempt="NaN"), ["IgnoredField"]),
        ok("ignored field user_agent with a control character and emoji", pl(user_agent="x\x01\U0001F600"), ["IgnoredField"]),
        ok("ignored field with 100 levels of nesting (payload object + 99 arrays, innermost empty)", pl(attempt=nested(98, [])), ["IgnoredField"]),
        bad("invalid-payload", "ignored field making 101 levels of nesting (payload object + 100 arrays, innermost empty)", pl(attempt=nested(99, [])), "accepts", ["IgnoredField", "DeepNesting"]),
        bad("invalid-payload", "ignored field with 150 levels of nested objects", pl(trace_id=json.loads("{\"a\":" * 149 + "1" + "}" * 149)), "accepts", ["IgnoredField", "DeepNesting"]),
    ]
    return cases


def f1_missing():
    cases = [ok("%s absent" % f, pl(**{f: DROP}), ["MissingField"]) for f in ("creditor_key", "amount", "currency", "remittance")]
    cases += [
        ok("empty payload {}", "{}", ["MissingField"]),
        ok("only creditor_key", {"creditor_key": "123.456.789-09"}, ["MissingField"]),
        ok("only currency", {"currency": "brl"}, ["MissingField"]),
        ok("only remittance", {"remittance": "x"}, ["MissingField"]),
    ]
    return cases


def f1_duplicates():
    return [
        ok("amount given twice: the last (\"2.00\") wins", '{"amount": "1.00", "amount": "2.00"}', ["DuplicateMember"]),
        ok("amount \"2.00\" alone (same key as the duplicate case)", '{"amount": "2.00"}', ["DuplicateMember"]),
        ok("remittance given twice, the first one invalid (a number): the last wins", '{"remittance": 5, "remittance": "ok"}', ["DuplicateMember"]),
        ok("amount given twice, the first one NaN: the last wins", '{"amount": "NaN", "amount": "1"}', ["DuplicateMember"]),
        ok("currency given three times", '{"currency": "USD", "currency": "EUR", "currency": "brl"}', ["DuplicateMember"]),
        ok("ignored field given twice", '{"attempt": 1, "attempt": 2, "amount": "1"}', ["DuplicateMember", "IgnoredField"]),
    ]


def f1_order():
    keys = list(BASE)
    perms = [keys, keys[::-1], [keys[2], keys[0], keys[3], keys[1]], [keys[1], keys[3], keys[0], keys[2]]]
    return [ok("payload members in order %s (same key)" % ", ".join(p), "{" + ", ".join("%s: %s" % (js(k), js(BASE[k])) for k in p) + "}", ["MemberOrder"]) for p in perms]


def f1_pix():
    return [
        ok("creditor_key CPF \"123.456.789-09\" keeps the digits", pl(creditor_key="123.456.789-09"), ["PixKeyForm"]),
        ok("creditor_key CPF bare digits \"12345678909\" (same key as the formatted CPF)", pl(creditor_key="12345678909"), ["PixKeyForm"]),
        ok("creditor_key CNPJ \"12.345.678/0001-95\"", pl(creditor_key="12.345.678/0001-95"), ["PixKeyForm"]),
        ok("creditor_key CNPJ bare digits \"12345678000195\"", pl(creditor_key="12345678000195"), ["PixKeyForm"]),
        ok("creditor_key e-mail with mixed case \"Maria.Silva@Example.COM\"", pl(creditor_key="Maria.Silva@Example.COM"), ["PixKeyForm", "CaseFolding"]),
        ok("creditor_key phone \"+55 11 99999-9999\" (has '+' and spaces: casefold path, kept as is)", pl(creditor_key="+55 11 99999-9999"), ["PixKeyForm"]),
        ok("creditor_key phone \"+5511999999999\" (casefold path)", pl(creditor_key="+5511999999999"), ["PixKeyForm"]),
        ok("creditor_key EVP UUID upper case (folds to lower)", pl(creditor_key="123E4567-E89B-12D3-A456-426614174000"), ["PixKeyForm", "CaseFolding"]),
        ok("creditor_key EVP UUID lower case (same key as upper)", pl(creditor_key="123e4567-e89b-12d3-a456-426614174000"), ["PixKeyForm"]),
        ok("creditor_key EVP UUID all digits and dashes looks like a document: digits kept", pl(creditor_key="12345678-1234-1234-1234-123456789012"), ["PixKeyForm"]),
        ok("creditor_key \"12 34\" (inner space: casefold path, kept)", pl(creditor_key="12 34"), ["PixKeyForm"]),
        ok("creditor_key \"123.456.789-0X\" with a letter: casefold path", pl(creditor_key="123.456.789-0X"), ["PixKeyForm", "CaseFolding"]),
        ok("creditor_key \"1\" (single digit)", pl(creditor_key="1"), ["PixKeyForm"]),
        ok("creditor_key \"-1-\"", pl(creditor_key="-1-"), ["PixKeyForm"]),
        bad("invalid-pix-key", "creditor_key \"--..//\" keeps no digits: empty", pl(creditor_key="--..//"), "accepts", ["PixKeyForm", "EmptyPixKey"]),
        bad("invalid-pix-key", "creditor_key \"..-/\" keeps no digits: empty", pl(creditor_key="..-/"), "accepts", ["PixKeyForm", "EmptyPixKey"]),
        bad("invalid-pix-key", "creditor_key \"\" is empty", pl(creditor_key=""), "accepts", ["PixKeyForm", "EmptyPixKey"]),
        bad("invalid-pix-key", "creditor_key \"   \" strips to empty", pl(creditor_key="   "), "accepts", ["PixKeyForm", "EmptyPixKey"]),
        bad("invalid-pix-key", "creditor_key U+3000 U+2028 U+0085 only: strips to empty", pl(creditor_key="\u3000\u2028\x85"), "accepts", ["PixKeyForm", "EmptyPixKey", "PythonWhitespace"]),
        bad("invalid-pix-key", "creditor_key CPF in ARABIC-INDIC digits \"١٢٣.٤٥٦.٧٨٩-٠٩\"", pl(creditor_key="١٢٣.٤٥٦.٧٨٩-٠٩"), "accepts", ["PixKeyForm", "NonAsciiDigits"]),
        bad("invalid-pix-key", "creditor_key CPF with one ARABIC-INDIC digit \"123.456.789-0٩\"", pl(creditor_key="123.456.789-0٩"), "accepts", ["PixKeyForm", "NonAsciiDigits"]),
        bad("invalid-pix-key", "creditor_key in FULLWIDTH digits \"１２３４５６７８９０９\"", pl(creditor_key="１２３４５６７８９０９"), "accepts", ["PixKeyForm", "NonAsciiDigits"]),
        bad("invalid-pix-key", "creditor_key CNPJ with a DEVANAGARI digit", pl(creditor_key="12.345.678/0001-9५"), "accepts", ["PixKeyForm", "NonAsciiDigits"]),
        ok("creditor_key \"١٢٣@x.com\" with ARABIC-INDIC digits but not a document key: folded, accepted", pl(creditor_key="١٢٣@x.com"), ["PixKeyForm"]),
    ]


def f1_currency():
    return [
        ok("currency \" brl \" -> BRL", pl(currency=" brl "), ["CurrencyForm"]),
        ok("currency \"usd\" -> USD", pl(currency="usd"), ["CurrencyForm"]),
        ok("currency \"Brl\" -> BRL", pl(currency="Brl"), ["CurrencyForm"]),
        ok("currency \"EUR\"", pl(currency="EUR"), ["CurrencyForm"]),
        ok("currency \"xxx\" (3 letters, not checked against ISO 4217)", pl(currency="xxx"), ["CurrencyForm"]),
        bad("invalid-currency", "currency \"BRLX\" has 4 letters", pl(currency="BRLX"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"BR\" has 2 letters", pl(currency="BR"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"\" is empty", pl(currency=""), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"   \" strips to empty", pl(currency="   "), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"R$\" is a symbol", pl(currency="R$"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"ßxy\" (the oracle uppercases it to \"SSXY\")", pl(currency="ßxy"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"ÀBC\" with a non-ASCII letter", pl(currency="ÀBC"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"B R\" with an inner space", pl(currency="B R"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"BR1\" with a digit", pl(currency="BR1"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"986\" (ISO numeric code as a string)", pl(currency="986"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency in FULLWIDTH letters \"ｂｒｌ\"", pl(currency="ｂｒｌ"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
        bad("invalid-currency", "currency \"ﬀi\" (ligature: upper gives \"FFI\", 3 letters, but the input is 2 characters)", pl(currency="ﬀi"), "accepts", ["CurrencyForm", "CurrencyNotThreeLetters"]),
    ]


def f1_unclassified():
    return [
        bad("unclassified-fields", "unclassified field memo", pl(memo="x"), "raises", ["UnclassifiedField"], oracle_error="ValueError"),
        bad("unclassified-fields", "two unclassified fields memo and note", pl(memo="x", note="y"), "raises", ["UnclassifiedField"], oracle_error="ValueError"),
        bad("unclassified-fields", "field \"Amount\" differs in case from amount", {"Amount": "1.00"}, "raises", ["UnclassifiedField"], oracle_error="ValueError"),
        bad("unclassified-fields", "field \"amount \" with a trailing space in its name", {"amount ": "1.00"}, "raises", ["UnclassifiedField"], oracle_error="ValueError"),
        bad("unclassified-fields", "field with an empty name", {"": "1.00", "amount": "1.00"}, "raises", ["UnclassifiedField"], oracle_error="ValueError"),
        bad("unclassified-fields", "unclassified field with a nested object value", pl(extra={"a": [1, 2]}), "raises", ["UnclassifiedField"], oracle_error="ValueError"),
        bad("unclassified-fields", "unclassified field with a null value", pl(extra=None), "raises", ["UnclassifiedField"], oracle_error="ValueError"),
        bad("unclassified-fields", "only an unclassified field", {"memo": "x"}, "raises", ["UnclassifiedField"], oracle_error="ValueError"),
        bad("unclassified-fields", "field named \"request-id\" (dash instead of underscore)", pl(**{"request-id": "r1"}), "raises", ["UnclassifiedField"], oracle_error="ValueError"),
    ]


def f1_payload_shape():
    return [
        bad("invalid-payload", "payload is an empty array (the oracle sees no members)", "[]", "accepts", ["NonObjectPayload"]),
        bad("invalid-payload", "payload is an empty string (the oracle sees no members)", "\"\"", "accepts", ["NonObjectPayload"]),
        bad("invalid-payload", "payload is null", "null", "raises", [], oracle_error="TypeError"),
        bad("invalid-payload", "payload is the number 5", "5", "raises", [], oracle_error="TypeError"),
        bad("invalid-payload", "payload is true", "true", "raises", [], oracle_error="TypeError"),
        bad("invalid-payload", "payload is the string \"amount\"", "\"amount\"", "raises", [], oracle_error="ValueError"),
        bad("invalid-payload", "payload is the array [\"amount\"]", "[\"amount\"]", "raises", [], oracle_error="TypeError"),
        bad("invalid-payload", "payload is an array of one object", "[{\"amount\": \"1.00\"}]", "raises", []),
    ]


def check_same_keys(groups):
    """Cross-checks the claims the comments make: equal inputs up to normalization give equal keys."""
    by = {g["comment"]: g["tests"] for g in groups}
    base = by["basic derivations"][0]["key"]

    def keys(name, pred=lambda t: True):
        return [t["key"] for t in by[name] if t["result"] == "valid" and pred(t)]

    def same(name, ks, want):
        if not ks or any(k != want for k in ks):
            raise GenError("fields_default: group %r: keys that must equal each other differ" % name)

    for name in ("Python whitespace at both ends of remittance (stripped)", "Python whitespace at both ends of currency (stripped)", "member order"):
        same(name, keys(name), base)
    name = "Python whitespace at both ends of creditor_key (stripped)"
    same(name, keys(name, lambda t: "Maria" in t["comment"]), base)
    cpf = keys(name, lambda t: "123.456" in t["comment"])
    same(name, cpf, cpf[0])
    same("pix-key forms", keys("pix-key forms", lambda t: "CPF" in t["comment"] and "digits" in t["comment"] and "ARABIC" not in t["comment"]), cpf[0])
    amt = keys("Python whitespace at both ends of amount strings (stripped)")
    same("amount whitespace", amt, amt[0])
    same("ignored fields", keys("ignored fields", lambda t: "same key as the base" in t["comment"] or "all five" in t["comment"]), base)
    dup = keys("duplicate member names")
    same("duplicate member names", dup[:2], dup[1])
    basic = keys("basic derivations")
    same("basic derivations", [basic[2], basic[3]] + basic[7:10], base)
    nfc = {t["comment"]: t["key"] for t in by["NFC composition and reordering"]}
    trip = [k for c, k in nfc.items() if "ngstr" in c or "U+212B" in c or "U+00C5" in c]
    same("NFC Å forms", trip, trip[0])


def build_fields_default():
    groups = []

    def add(comment, cases):
        tests = [fields_test(c, where="fields_default") for c in cases]
        groups.append(group("FieldsDerivation", comment, "oracle", tests, policy=None))

    add("basic derivations", f1_basic())
    add("secret lengths", f1_secrets())
    add("tenant_id and action_type", f1_identity())
    add("Python whitespace at both ends of remittance (stripped)", f1_whitespace("remittance"))
    add("Python whitespace at both ends of creditor_key (stripped)", f1_whitespace("creditor_key"))
    add("Python whitespace at both ends of currency (stripped)", f1_whitespace("currency"))
    add("Python whitespace at both ends of amount strings (stripped)", f1_whitespace("amount"))
    add("more whitespace, and characters that are not whitespace", f1_whitespace_extra())
    add("full case folding vs lowercase", f1_casefold())
    add("NFC composition and reordering", f1_nfc())
    add("JSON escaping in the material", f1_escaping())
    add("characters outside the BMP", f1_astral())
    add("amounts as JSON numbers with '.', 'e' or 'E' (IEEE doubles)", f1_floats())
    add("amounts as JSON integer literals and the 28-digit limit", f1_integers())
    add("amounts as decimal strings", f1_string_amounts())
    add("field values of the wrong JSON type", f1_field_types())
    add("time bucket boundaries (900 s)", f1_bucket())
    add("ignored fields", f1_ignored())
    add("missing fields", f1_missing())
    add("duplicate member names", f1_duplicates())
    add("member order", f1_order())
    add("pix-key forms", f1_pix())
    add("currency forms", f1_currency())
    add("unclassified fields", f1_unclassified())
    add("payload that is not a JSON object", f1_payload_shape())
    check_same_keys(groups)
    header = ["Fields-mode keys with the built-in default policy (the article's payments table).",
              "material = UTF-8 of json.dumps([tenantId, actionType, body, intentEpoch // 900], sort_keys=True, separators=(',', ':'), ensure_ascii=False); key = HMAC-SHA256(secret, material), 64 hex.",
              "payload is the raw JSON text; number literals are as written. Valid cases were computed by the reference oracle; where intentkey refuses or canonicalizes what the oracle accepts, oracleKey/oracleMaterial record the oracle and a flag says why."]
    return build_file("intentkey-fields-hmac-sha256", header, groups)


# ---------------------------------------------------------------------------
# File 2: JSON-lines requests
# ---------------------------------------------------------------------------
MISSING = object()


def model_line(text):
    """(id to echo, Outcome) as intentkey answers one request line (default policy)."""
    try:
        obj = parse_strict(text)
    except StrictJsonError as exc:
        return None, Outcome([Fault("invalid-json", str(exc))])
    if not isinstance(obj, dict):
        return None, Outcome([Fault("invalid-json", "the line is not a JSON object")])
    policy = load_policy(None)
    rid = obj.get("id")
    faults = []
    sh = obj.get("secret_hex", MISSING)
    secret = None
    if not isinstance(sh, str) or len(sh) % 2 or not re.fullmatch(r"[0-9a-fA-F]*", sh):
        faults.append(Fault("invalid-secret", "secret_hex must be an even number of hex digits"))
    else:
        secret = bytes.fromhex(sh)
        check_secret(secret, faults)
    tenant = obj.get("tenant_id", MISSING)
    action = obj.get("action_type", MISSING)
    check_identity(policy, None if tenant is MISSING else tenant, None if action is MISSING else action, faults)
    body = None
    canon = False
    if "payload" not in obj:
        faults.append(Fault("invalid-payload", "payload missing"))
    else:
        body, canon, body_faults = model_body(policy, obj["payload"])
        faults += body_faults
    epoch = obj.get("intent_epoch", MISSING)
    if not is_int(epoch) or not I64_MIN <= epoch <= I64_MAX:
        faults.append(Fault("invalid-epoch", "intent_epoch must be a JSON integer in i64"))
    if faults:
        return rid, Outcome(faults)
    material = canonical([tenant, action, body, epoch // policy.bucket])
    return rid, Outcome([], material, mac(secret, material), canon)


def python_reads_object(text):
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def line_test(case, where):
    rid, outcome = model_line(case.payload)
    oracle_result = None
    if python_reads_object(case.payload):
        out = ORACLE.run_case(json.loads(case.payload))
        if "error" in out:
            oracle_result = ("raised", out["error"], out.get("message", ""))
        else:
            oracle_result = ("accepted", out["material"], out["key"])
    t = {"comment": case.comment, "flags": case.flags, "line": case.payload, "id": rid}
    res = reconcile(case, outcome, oracle_result, where)
    res.pop("material", None)
    if oracle_result is None:
        # The oracle's driver cannot even call run_case: json.loads fails or the line is not an object.
        try:
            json.loads(case.payload)
            res["oracleError"] = "AttributeError"
        except ValueError as exc:
            res["oracleError"] = type(exc).__name__
    t.update(res)
    return t, oracle_result is not None


REQ = {"id": "req-1", "secret_hex": SECRET.hex(), "tenant_id": TENANT, "action_type": ACTION,
       "payload": BASE, "intent_epoch": EPOCH}


def rq(**changes):
    d = dict(REQ)
    for k, v in changes.items():
        if v is DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return json.dumps(d, ensure_ascii=False)


def rq_raw(member, literal, **changes):
    """A request line whose member `member` has the exact JSON literal text given."""
    marker = "\"__RAW__\""
    return rq(**{member: "__RAW__"}, **changes).replace(marker, literal)


def lc(comment, line, expect="valid", oracle=None, flags=(), oracle_error=None):
    return Case(comment, line, expect, oracle, flags, oracle_error=oracle_error)


def f2_cases():
    big = "x" * 100_000
    payload_raw = lambda literal: rq_raw("payload", literal)
    return [
        lc("a valid request line", rq(), flags=["RequestLine"]),
        lc("a valid line with the members in another order", json.dumps({k: REQ[k] for k in reversed(list(REQ))}, ensure_ascii=False), flags=["RequestLine"]),
        lc("a valid compact line without spaces", json.dumps(REQ, ensure_ascii=False, separators=(",", ":")), flags=["RequestLine"]),
        lc("unknown extra members are ignored", rq(extra=1, meta={"a": [1, 2]}, note=None), flags=["RequestLine"]),
        lc("no id member: id echoes as null", rq(id=DROP), flags=["RequestLine"]),
        lc("id is null", rq(id=None), flags=["RequestLine"]),
        lc("id is a number and is echoed as a number", rq(id=42), flags=["RequestLine"]),
        lc("id with non-ASCII and an emoji", rq(id="pedido-ç-\U0001F600"), flags=["RequestLine"]),
        lc("secret_hex in upper-case hex digits", rq(secret_hex=SECRET.hex().upper()), flags=["RequestLine"]),
        lc("secret of 64 bytes", rq(secret_hex=(SECRET * 2).hex()), flags=["RequestLine", "SecretLength"]),
        lc("intent_epoch 2^63-1 (largest i64)", rq(intent_epoch=I64_MAX), flags=["BucketBoundary"]),
        lc("intent_epoch -2^63 (smallest i64)", rq(intent_epoch=I64_MIN), flags=["BucketBoundary"]),
        lc("intent_epoch -1: bucket -1", rq(intent_epoch=-1), flags=["BucketBoundary"]),
        lc("intent_epoch written -0 (integer literal)", rq_raw("intent_epoch", "-0"), flags=["BucketBoundary"]),
        lc("payload with an integer amount and a float amount in an ignored field", payload_raw('{"amount": 10, "attempt": 1.5}'), flags=["RequestLine"]),
        lc("empty payload object", rq(payload={}), flags=["MissingField"]),
        lc("raw U+2028 LINE SEPARATOR inside remittance", rq(payload=pl(remittance="a\u2028b")), flags=["JsonEscaping"]),
        lc("raw U+2029 PARAGRAPH SEPARATOR inside remittance", rq(payload=pl(remittance="a\u2029b")), flags=["JsonEscaping"]),
        lc("raw U+0085 NEXT LINE inside remittance", rq(payload=pl(remittance="a\x85b")), flags=["JsonEscaping"]),
        lc("raw U+2028 at the end of remittance (stripped)", rq(payload=pl(remittance="ab\u2028")), flags=["PythonWhitespace"]),
        lc("escaped \\u001c inside remittance (kept in the middle)", rq(payload=pl(remittance="a\x1cb")), flags=["JsonEscaping"]),
        lc("escaped \\u001c at both ends of remittance (stripped)", rq(payload=pl(remittance="\x1cab\x1c")), flags=["PythonWhitespace"]),
        lc("emoji as an escaped surrogate pair in remittance", json.dumps(dict(REQ, payload=pl(remittance="\U0001F600")), ensure_ascii=True), flags=["AstralChars"]),
        lc("a 100 kB remittance", rq(payload=pl(remittance=big)), flags=["RequestLine"]),
        lc("tenant_id with a control character and astral text", rq(tenant_id="t\x01\U00010400"), flags=["JsonEscaping"]),
        lc("amount -0.001 canonicalized to 0.00 in a line", rq(payload=pl(amount="-0.001")), flags=["NegativeZeroCanonicalized"]),
        # missing members
        lc("secret_hex missing", rq(secret_hex=DROP), "invalid-secret", "raises", ["RequestLine"], "KeyError"),
        lc("tenant_id missing", rq(tenant_id=DROP), "invalid-tenant-id", "raises", ["RequestLine"], "KeyError"),
        lc("action_type missing", rq(action_type=DROP), "invalid-action-type", "raises", ["RequestLine"], "KeyError"),
        lc("payload missing", rq(payload=DROP), "invalid-payload", "raises", ["RequestLine"], "KeyError"),
        lc("intent_epoch missing", rq(intent_epoch=DROP), "invalid-epoch", "raises", ["RequestLine"], "KeyError"),
        # secrets
        lc("secret_hex with a non-hex character", rq(secret_hex="zz" + SECRET.hex()[2:]), "invalid-secret", "raises", ["RequestLine"], "ValueError"),
        lc("secret_hex of odd length", rq(secret_hex=SECRET.hex() + "0"), "invalid-secret", "raises", ["RequestLine"], "ValueError"),
        lc("secret_hex with a 0x prefix", rq(secret_hex="0x" + SECRET.hex()), "invalid-secret", "raises", ["RequestLine"], "ValueError"),
        lc("secret_hex with spaces between bytes (Python fromhex skips them)", rq(secret_hex=" ".join(SECRET.hex()[i:i + 2] for i in range(0, 64, 2))), "invalid-secret", "accepts", ["SecretHexSpaces"]),
        lc("secret_hex with one leading space", rq(secret_hex=" " + SECRET.hex()), "invalid-secret", "accepts", ["SecretHexSpaces"]),
        lc("secret_hex is a number", rq(secret_hex=1234), "invalid-secret", "raises", ["RequestLine"], "TypeError"),
        lc("secret_hex is null", rq(secret_hex=None), "invalid-secret", "raises", ["RequestLine"], "TypeError"),
        lc("secret_hex is empty: 0 bytes", rq(secret_hex=""), "secret-too-short", "accepts", ["ShortSecret"]),
        lc("secret_hex of 31 bytes", rq(secret_hex=SECRET.hex()[:62]), "secret-too-short", "accepts", ["ShortSecret"]),
        # epochs
        lc("intent_epoch 1.5", rq_raw("intent_epoch", "1.5"), "invalid-epoch", "accepts", ["NonIntegerEpoch"]),
        lc("intent_epoch -1.5", rq_raw("intent_epoch", "-1.5"), "invalid-epoch", "accepts", ["NonIntegerEpoch"]),
        lc("intent_epoch 1e3", rq_raw("intent_epoch", "1e3"), "invalid-epoch", "accepts", ["NonIntegerEpoch"]),
        lc("intent_epoch 1732950000.0", rq_raw("intent_epoch", "1732950000.0"), "invalid-epoch", "accepts", ["NonIntegerEpoch"]),
        lc("intent_epoch the string \"123\"", rq(intent_epoch="123"), "invalid-epoch", "accepts", ["NonIntegerEpoch"]),
        lc("intent_epoch true", rq(intent_epoch=True), "invalid-epoch", "accepts", ["NonIntegerEpoch"]),
        lc("intent_epoch null", rq(intent_epoch=None), "invalid-epoch", "raises", ["RequestLine"], "TypeError"),
        lc("intent_epoch the string \"abc\"", rq(intent_epoch="abc"), "invalid-epoch", "raises", ["RequestLine"], "ValueError"),
        lc("intent_epoch an array", rq(intent_epoch=[1]), "invalid-epoch", "raises", ["RequestLine"], "TypeError"),
        lc("intent_epoch 2^63 (one past i64)", rq(intent_epoch=2 ** 63), "invalid-epoch", "accepts", ["EpochOutOfRange"]),
        lc("intent_epoch -2^63-1 (one below i64)", rq(intent_epoch=-(2 ** 63) - 1), "invalid-epoch", "accepts", ["EpochOutOfRange"]),
        lc("intent_epoch 10^30", rq(intent_epoch=10 ** 30), "invalid-epoch", "accepts", ["EpochOutOfRange"]),
        # tenant / action
        lc("tenant_id is a number", rq(tenant_id=42), "invalid-tenant-id", "accepts", ["NonStringIdentity"]),
        lc("tenant_id is null", rq(tenant_id=None), "invalid-tenant-id", "accepts", ["NonStringIdentity"]),
        lc("tenant_id is empty", rq(tenant_id=""), "invalid-tenant-id", "accepts", ["EmptyTenantId"]),
        lc("tenant_id is an array", rq(tenant_id=["t"]), "invalid-tenant-id", "accepts", ["NonStringIdentity"]),
        lc("action_type is a number", rq(action_type=7), "invalid-action-type", "accepts", ["NonStringIdentity"]),
        lc("action_type is null", rq(action_type=None), "invalid-action-type", "accepts", ["NonStringIdentity"]),
        lc("action_type is empty", rq(action_type=""), "invalid-action-type", "accepts", ["EmptyActionType"]),
        # payload
        lc("payload is an empty array", rq(payload=[]), "invalid-payload", "accepts", ["NonObjectPayload"]),
        lc("payload is an empty string", rq(payload=""), "invalid-payload", "accepts", ["NonObjectPayload"]),
        lc("payload is a string", rq(payload="amount"), "invalid-payload", "raises", ["RequestLine"], "ValueError"),
        lc("payload is null", rq(payload=None), "invalid-payload", "raises", ["RequestLine"], "TypeError"),
        lc("payload is a number", rq(payload=10), "invalid-payload", "raises", ["RequestLine"], "TypeError"),
        lc("payload is an array of an object", rq(payload=[{"amount": "1"}]), "invalid-payload", "raises", ["RequestLine"], "TypeError"),
        lc("payload with 101 levels of nesting in an ignored field", rq(payload=pl(attempt=nested(99, []))), "invalid-payload", "accepts", ["DeepNesting"]),
        lc("payload with an unclassified field", rq(payload=pl(memo="x")), "unclassified-fields", "raises", ["UnclassifiedField"], "ValueError"),
        lc("payload amount \"NaN\"", rq(payload=pl(amount="NaN")), "invalid-decimal", "accepts", ["NanAmount"]),
        lc("payload amount true", rq(payload=pl(amount=True)), "invalid-field-type", "raises", ["FieldType"], "InvalidOperation"),
        lc("payload currency \"BRLX\"", rq(payload=pl(currency="BRLX")), "invalid-currency", "accepts", ["CurrencyNotThreeLetters"]),
        lc("payload amount 10**26", rq(payload=pl(amount=10 ** 26)), "decimal-out-of-range", "raises", ["Precision28"], "InvalidOperation"),
        # non-standard JSON Python accepts
        lc("NaN literal in the ignored field attempt", payload_raw('{"amount": "1.00", "attempt": NaN}'), "invalid-json", "accepts", ["NonStandardJson"]),
        lc("-Infinity literal in the ignored field trace_id", payload_raw('{"amount": "1.00", "trace_id": -Infinity}'), "invalid-json", "accepts", ["NonStandardJson"]),
        lc("NaN literal as the amount (the oracle hashes \"NaN\")", payload_raw('{"amount": NaN}'), "invalid-json", "accepts", ["NonStandardJson"]),
        lc("Infinity literal as the amount", payload_raw('{"amount": Infinity}'), "invalid-json", "raises", ["InvalidJson"], "InvalidOperation"),
        lc("NaN literal as the id", rq_raw("id", "NaN"), "invalid-json", "accepts", ["NonStandardJson"]),
        lc("lone surrogate escape \\ud800 in remittance", payload_raw('{"remittance": "a\\ud800b"}'), "invalid-json", "raises", ["InvalidJson"], "UnicodeEncodeError"),
        lc("lone low surrogate escape \\udc00 in remittance", payload_raw('{"remittance": "a\\udc00b"}'), "invalid-json", "raises", ["InvalidJson"], "UnicodeEncodeError"),
        lc("surrogate escapes in the wrong order \\ude00\\ud83d in remittance", payload_raw('{"remittance": "\\ude00\\ud83d"}'), "invalid-json", "raises", ["InvalidJson"], "UnicodeEncodeError"),
        lc("lone surrogate escape \\ud800 in the ignored field request_id", payload_raw('{"amount": "1.00", "request_id": "\\ud800"}'), "invalid-json", "accepts", ["NonStandardJson"]),
        lc("lone surrogate escape in the id", rq_raw("id", '"\\udfff"'), "invalid-json", "accepts", ["NonStandardJson"]),
        # not JSON at all (the oracle's json.loads fails)
        lc("plain text, not JSON", "hello", "invalid-json", "raises", ["InvalidJson"]),
        lc("truncated JSON object", rq()[:-10], "invalid-json", "raises", ["InvalidJson"]),
        lc("a JSON object followed by extra text", rq() + " x", "invalid-json", "raises", ["InvalidJson"]),
        lc("two JSON objects on one line", rq() + rq(), "invalid-json", "raises", ["InvalidJson"]),
        lc("trailing comma in the object", rq()[:-1] + ",}", "invalid-json", "raises", ["InvalidJson"]),
        lc("single-quoted strings", rq().replace('"', "'"), "invalid-json", "raises", ["InvalidJson"]),
        lc("RAW U+001C inside a JSON string", rq(payload=pl(remittance="PLACEHOLDER")).replace("PLACEHOLDER", "a\x1cb"), "invalid-json", "raises", ["InvalidJson"]),
        lc("RAW U+0000 inside a JSON string", rq(payload=pl(remittance="PLACEHOLDER")).replace("PLACEHOLDER", "a\x00b"), "invalid-json", "raises", ["InvalidJson"]),
        lc("RAW tab inside a JSON string", rq(payload=pl(remittance="PLACEHOLDER")).replace("PLACEHOLDER", "a\tb"), "invalid-json", "raises", ["InvalidJson"]),
        lc("invalid escape \\x41 inside a JSON string", rq(payload=pl(remittance="PLACEHOLDER")).replace("PLACEHOLDER", "a\\x41"), "invalid-json", "raises", ["InvalidJson"]),
        lc("a JSON array line", json.dumps([REQ], ensure_ascii=False), "invalid-json", "raises", ["InvalidJson"]),
        lc("a bare number line", "42", "invalid-json", "raises", ["InvalidJson"]),
        lc("a JSON string line", "\"req-1\"", "invalid-json", "raises", ["InvalidJson"]),
        lc("the line null", "null", "invalid-json", "raises", ["InvalidJson"]),
    ]


def build_request_lines():
    oracle_tests, spec_tests = [], []
    for case in f2_cases():
        t, by_oracle = line_test(case, "request_lines")
        (oracle_tests if by_oracle else spec_tests).append(t)
    groups = [group("RequestLine", "lines Python reads as a JSON object: expectations checked against the oracle's run_case", "oracle", oracle_tests),
              group("RequestLine", "lines the oracle's driver cannot run (json.loads fails or the line is not an object): expectations from the spec", "spec", spec_tests)]
    header = ["The JSON-lines contract of `intentkey derive --jsonl`: one request object per line, one answer per line, the id echoed (null when absent or the line is not a readable JSON object).",
              "Request members: id, secret_hex, tenant_id, action_type, payload, intent_epoch; unknown members are ignored. Default policy. key = the fields-mode key (64 hex).",
              "oracleError names the exception the oracle raised (for lines the oracle's driver cannot run: the exception json.loads raised, or AttributeError when the line is not an object)."]
    return build_file("intentkey-derive-jsonl", header, groups)


# ---------------------------------------------------------------------------
# File 3: custom policies
# ---------------------------------------------------------------------------
P_PAYMENTS = {
    "version": 1, "name": "payments", "bucketSeconds": 900, "actionTypes": ["pix.send"], "keyHexLength": 64,
    "fields": {"creditor_key": {"class": "key", "normalizer": "pix-key"},
               "amount": {"class": "key", "normalizer": "decimal", "scale": 2, "rounding": "half-up"},
               "currency": {"class": "key", "normalizer": "currency"},
               "remittance": {"class": "key", "normalizer": "text"},
               "order_no": {"class": "key", "normalizer": "integer"},
               "ref": {"class": "key", "normalizer": "exact"},
               "note": {"class": "fingerprint"},
               "request_id": {"class": "ignored"}}}

P_SHORT = {
    "version": 1, "name": "short-keys", "bucketSeconds": 60, "keyHexLength": 40, "actionTypes": ["transfer", "refund"],
    "fields": {"amount": {"class": "key", "normalizer": "decimal", "scale": 0, "rounding": "half-up"},
               "sku": {"class": "key", "normalizer": "exact"},
               "qty": {"class": "key", "normalizer": "integer"},
               "memo": {"class": "fingerprint"},
               "trace": {"class": "ignored"}}}

P_MIN = {"version": 1, "bucketSeconds": 1, "keyHexLength": 32,
         "fields": {"v": {"class": "key", "normalizer": "decimal", "scale": 18},
                    "t": {"class": "key", "normalizer": "text"}}}

P_SCALE7 = {"version": 1, "name": "scale-7", "fields": {"v": {"class": "key", "normalizer": "decimal", "scale": 7}}}

P_UNI = {"version": 1, "name": "unicode-names",
         "fields": {"\U0001F600": {"class": "key", "normalizer": "exact"},
                    "\uff41": {"class": "key", "normalizer": "exact"},
                    "z": {"class": "key", "normalizer": "text"},
                    "\u00e9": {"class": "key", "normalizer": "decimal"},
                    "e\u0301": {"class": "key", "normalizer": "exact"},
                    "chave": {"class": "key", "normalizer": "pix-key"},
                    "moeda": {"class": "key", "normalizer": "currency"}}}

PAY3 = {"creditor_key": "123.456.789-09", "amount": "99.90", "currency": "brl", "remittance": "Pedido 42",
        "order_no": 42, "ref": "Ref-42", "note": "first try", "request_id": "r-1"}


def p3(**changes):
    d = dict(PAY3)
    for k, v in changes.items():
        if v is DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def sc(comment, payload, expect="valid", flags=(), **kw):
    """A spec-only case (no oracle for custom policies). sc(comment, payload, flags) is valid."""
    if isinstance(expect, (list, tuple)):
        expect, flags = "valid", expect
    return Case(comment, payload, expect, None, flags, **kw)


def f3_payments():
    f = ["CustomPolicy"]
    return [
        sc("all fields present", p3(), f),
        sc("order_no JSON integer 42 and string \"42\" agree (this one: string)", p3(order_no="42"), f + ["IntegerNormalizer"]),
        sc("order_no string \"007\" -> \"7\"", p3(order_no="007"), f + ["IntegerNormalizer"]),
        sc("order_no string \"-0\" -> \"0\"", p3(order_no="-0"), f + ["IntegerNormalizer"]),
        sc("order_no string \"-007\" -> \"-7\"", p3(order_no="-007"), f + ["IntegerNormalizer"]),
        sc("order_no JSON integer -5", p3(order_no=-5), f + ["IntegerNormalizer"]),
        sc("order_no JSON integer with 30 digits (no range limit)", payload_text_with(p3(), "order_no", "123456789012345678901234567890"), f + ["IntegerNormalizer"]),
        sc("order_no string with 30 digits", p3(order_no="000123456789012345678901234567890"), f + ["IntegerNormalizer"]),
        sc("order_no JSON number 1.0", payload_text_with(p3(), "order_no", "1.0"), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no JSON number 1e3", payload_text_with(p3(), "order_no", "1e3"), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no string \"+5\"", p3(order_no="+5"), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no string \" 5\" (no strip)", p3(order_no=" 5"), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no string \"5\\n\" (trailing newline)", p3(order_no="5\n"), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no empty string", p3(order_no=""), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no string \"1.0\"", p3(order_no="1.0"), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no string \"1e3\"", p3(order_no="1e3"), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no string in ARABIC-INDIC digits \"١٢\"", p3(order_no="١٢"), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no string \"1_000\"", p3(order_no="1_000"), "invalid-integer", f + ["IntegerNormalizer"]),
        sc("order_no true", p3(order_no=True), "invalid-field-type", f + ["IntegerNormalizer", "FieldType"]),
        sc("order_no null", p3(order_no=None), "invalid-field-type", f + ["IntegerNormalizer", "FieldType"]),
        sc("order_no an array", p3(order_no=[42]), "invalid-field-type", f + ["IntegerNormalizer", "FieldType"]),
        sc("ref with edge spaces and upper case kept verbatim", p3(ref="  Ref-ÇÃO  "), f + ["ExactNormalizer"]),
        sc("ref \"e\\u0301\" decomposed is not NFC-normalized", p3(ref="caf\u0065\u0301"), f + ["ExactNormalizer"]),
        sc("ref \"\\u00e9\" precomposed: a different key", p3(ref="caf\u00e9"), f + ["ExactNormalizer"]),
        sc("ref empty string", p3(ref=""), f + ["ExactNormalizer"]),
        sc("ref with a control character", p3(ref="a\x07b"), f + ["ExactNormalizer", "JsonEscaping"]),
        sc("ref JSON number 5", p3(ref=5), "invalid-field-type", f + ["ExactNormalizer", "FieldType"]),
        sc("ref null", p3(ref=None), "invalid-field-type", f + ["ExactNormalizer", "FieldType"]),
        sc("fingerprint field note changed to an object: same key", p3(note={"b": 1, "a": [1.5]}), f + ["FingerprintClassField"]),
        sc("fingerprint field note absent: same key", p3(note=DROP), f + ["FingerprintClassField"]),
        sc("ignored field request_id changed: same key", p3(request_id="r-2"), f + ["IgnoredField"]),
        sc("optional fields absent", {"amount": "1"}, f + ["MissingField"]),
        sc("amount \"-0.001\" canonicalized to 0.00", p3(amount="-0.001"), f + ["NegativeZeroCanonicalized"]),
        sc("action type pix.refund is not in actionTypes", p3(), "unknown-action-type", f + ["UnknownActionType"], action="pix.refund"),
        sc("action type PIX.SEND differs in case from pix.send", p3(), "unknown-action-type", f + ["UnknownActionType"], action="PIX.SEND"),
        sc("field attempt is ignored by the default policy but unclassified here", p3(attempt=1), "unclassified-fields", f + ["UnclassifiedField"]),
        sc("currency \"BRLX\"", p3(currency="BRLX"), "invalid-currency", f + ["CurrencyForm"]),
        sc("creditor_key \"..-/\"", p3(creditor_key="..-/"), "invalid-pix-key", f + ["PixKeyForm"]),
        sc("amount \"NaN\"", p3(amount="NaN"), "invalid-decimal", f + ["MalformedDecimal"]),
        sc("empty tenant_id", p3(), "invalid-tenant-id", f, tenant=""),
        sc("secret of 31 bytes", p3(), "secret-too-short", f, secret=SECRET[:31]),
    ]


def payload_text_with(d, member, literal):
    text = js(dict(d, **{member: "__RAW__"}))
    return text.replace('"__RAW__"', literal)


def f3_short():
    f = ["CustomPolicy", "KeyTruncation"]
    base = {"amount": "10.5", "sku": "SKU-1", "qty": 3, "memo": "m", "trace": "t"}
    b = lambda **kw: dict(base, **kw)
    return [
        sc("40-hex key, bucket 60, scale 0: \"10.5\" -> \"11\"", b(), f + ["DecimalScale"], action="transfer"),
        sc("scale 0: \"10.4\" -> \"10\"", b(amount="10.4"), f + ["DecimalScale"], action="transfer"),
        sc("scale 0: JSON 2.5 -> \"3\"", payload_text_with(b(), "amount", "2.5"), f + ["DecimalScale", "HalfUpRounding"], action="transfer"),
        sc("scale 0: JSON -2.5 -> \"-3\"", payload_text_with(b(), "amount", "-2.5"), f + ["DecimalScale", "HalfUpRounding"], action="transfer"),
        sc("scale 0: \"1e3\" -> \"1000\"", b(amount="1e3"), f + ["DecimalScale"], action="transfer"),
        sc("scale 0: \"-0.4\" gives -0, canonicalized to \"0\"", b(amount="-0.4"), f + ["DecimalScale", "NegativeZeroCanonicalized"], action="transfer"),
        sc("scale 0: 28 nines fit", b(amount="9" * 28), f + ["DecimalScale", "Precision28"], action="transfer"),
        sc("scale 0: \"1e28\" needs 29 digits", b(amount="1e28"), "decimal-out-of-range", f + ["DecimalScale", "Precision28"], action="transfer"),
        sc("action refund is listed", b(), f, action="refund"),
        sc("action pay is not listed", b(), "unknown-action-type", f + ["UnknownActionType"], action="pay"),
        sc("bucket 60: epoch 59 is bucket 0", b(), f + ["BucketBoundary"], action="transfer", epoch=59),
        sc("bucket 60: epoch 60 is bucket 1", b(), f + ["BucketBoundary"], action="transfer", epoch=60),
        sc("bucket 60: epoch -1 is bucket -1", b(), f + ["BucketBoundary"], action="transfer", epoch=-1),
        sc("memo (fingerprint) and trace (ignored) absent: same key as the first case", {"amount": "10.5", "sku": "SKU-1", "qty": 3}, f + ["FingerprintClassField"], action="transfer"),
    ]


def f3_min():
    f = ["CustomPolicy", "KeyTruncation", "DecimalScale"]
    return [
        sc("32-hex key, bucket 1 (bucket = epoch), scale 18: \"1.5\"", {"v": "1.5", "t": "Olá"}, f, epoch=1732950001),
        sc("scale 18: \"123.456789012345678912\" rounds half-up at 18 places", {"v": "123.456789012345678912"}, f + ["HalfUpRounding"]),
        sc("scale 18: \"9999999999\" (10 integer digits + 18 = 28 digits)", {"v": "9999999999"}, f + ["Precision28"]),
        sc("scale 18: \"10000000000\" needs 29 digits", {"v": "10000000000"}, "decimal-out-of-range", f + ["Precision28"]),
        sc("scale 18: \"0.000001\" prints plainly", {"v": "0.000001"}, f),
        sc("bucket 1: epoch -1 is bucket -1", {"t": "x"}, ["CustomPolicy", "BucketBoundary"], epoch=-1),
        sc("no actionTypes: any non-empty action type", {"t": "x"}, ["CustomPolicy"], action="anything.goes"),
        sc("no actionTypes: empty action type still refused", {"t": "x"}, "invalid-action-type", ["CustomPolicy"], action=""),
        sc("field named like a default field (amount) is unclassified here", {"amount": "1"}, "unclassified-fields", ["CustomPolicy", "UnclassifiedField"]),
    ]


def f3_scientific():
    f = ["CustomPolicy", "DecimalScale", "DecimalPlainNotation"]
    return [
        (P_MIN, sc("scale 18: \"0.000000000000000001\" is written plainly (Python str() says \"1E-18\")", {"v": "0.000000000000000001"}, f)),
        (P_MIN, sc("scale 18: \"0\" is written \"0.000000000000000000\" (Python str() says \"0E-18\")", {"v": "0"}, f)),
        (P_MIN, sc("scale 18: \"1e-19\" rounds to zero, written plainly", {"v": "1e-19"}, f)),
        (P_MIN, sc("scale 18: \"-1e-19\" rounds to negative zero, canonicalized and written plainly", {"v": "-1e-19"}, f + ["NegativeZeroCanonicalized"])),
        (P_MIN, sc("scale 18: \"0.0000005\" is written plainly (Python str() says \"5.00000000000E-7\")", {"v": "0.0000005"}, f)),
        (P_SCALE7, sc("scale 7: \"0.0000001\" is written plainly (Python str() says \"1E-7\")", {"v": "0.0000001"}, f)),
        (P_SCALE7, sc("scale 7: JSON 0 is written \"0.0000000\" (Python str() says \"0E-7\")", payload_text_with({}, "v", "0"), f)),
        (P_SCALE7, sc("scale 7: \"0.000001\" prints plainly \"0.0000010\"", {"v": "0.000001"}, ["CustomPolicy", "DecimalScale"])),
        (P_SCALE7, sc("scale 7: \"1.5\" prints plainly", {"v": "1.5"}, ["CustomPolicy", "DecimalScale"])),
    ]


def f3_unicode():
    f = ["CustomPolicy", "CodePointOrder"]
    full = {"\U0001F600": "emoji", "\uff41": "fullwidth", "z": "Zeta", "\u00e9": "1.5", "e\u0301": "decomposed",
            "chave": "A@B.com", "moeda": "usd"}
    return [
        sc("non-ASCII field names sort by code point: chave, e + U+0301, moeda, z, é U+00E9, ａ U+FF41, 😀 U+1F600 (UTF-16 order would put 😀 before ａ)", full, f),
        sc("field names é (U+00E9) and e + U+0301 are different fields (names are not normalized)", {"\u00e9": "2", "e\u0301": "x"}, f),
        sc("defaults: bucketSeconds 900, keyHexLength 64, decimal scale 2", {"\u00e9": "0.125"}, ["CustomPolicy", "HalfUpRounding"], epoch=1799),
        sc("pix-key and currency normalizers under other field names", {"chave": " 123.456.789-09 ", "moeda": " eur "}, ["CustomPolicy", "PixKeyForm", "CurrencyForm"]),
        sc("field named \"E\\u0301\" (upper case) is unclassified", {"E\u0301": "x"}, "unclassified-fields", ["CustomPolicy", "UnclassifiedField"]),
    ]


def f3_default_json():
    cases = [
        ok("default policy as JSON: base payload", pl(), ["DefaultPolicyJson"]),
        ok("default policy as JSON: float amount 1.005", payload_with_raw("1.005"), ["DefaultPolicyJson", "FloatAmount"]),
        ok("default policy as JSON: remittance with U+3000 at both ends", pl(remittance="\u3000x\u3000"), ["DefaultPolicyJson", "PythonWhitespace"]),
        ok("default policy as JSON: ignored fields", pl(request_id="r", attempt=2, trace_id="t", created_at="c", user_agent="u"), ["DefaultPolicyJson", "IgnoredField"]),
        ok("default policy as JSON: any action type", pl(), ["DefaultPolicyJson"], action="anything"),
        ok("default policy as JSON: bucket -1", pl(), ["DefaultPolicyJson", "BucketBoundary"], epoch=-1),
        ok("default policy as JSON: \"ΣΑΣ\" folds to \"σασ\"", pl(remittance="ΣΑΣ"), ["DefaultPolicyJson", "CaseFolding"]),
        ok("default policy as JSON: amount \"-0\" canonicalized", pl(amount="-0"), ["DefaultPolicyJson", "NegativeZeroCanonicalized"]),
        bad("unclassified-fields", "default policy as JSON: unclassified memo", pl(memo="x"), "raises", ["DefaultPolicyJson", "UnclassifiedField"], oracle_error="ValueError"),
        bad("invalid-currency", "default policy as JSON: currency \"BRLX\"", pl(currency="BRLX"), "accepts", ["DefaultPolicyJson", "CurrencyNotThreeLetters"]),
    ]
    return cases


def f3_policy_invalid():
    B = {"version": 1, "fields": {"amount": {"class": "key", "normalizer": "decimal"}}}

    def w(**changes):
        d = json.loads(json.dumps(B))
        for k, v in changes.items():
            if v is DROP:
                d.pop(k, None)
            else:
                d[k] = v
        return d

    def fx(spec, name="x"):
        return w(fields={"amount": {"class": "key", "normalizer": "decimal"}, name: spec})

    def amt(**kw):
        return w(fields={"amount": dict({"class": "key", "normalizer": "decimal"}, **kw)})

    return [
        ("", "the policy is an array", []),
        ("", "the policy is a string", "payments"),
        ("", "the policy is null", None),
        ("", "the policy is a number", 1),
        ("unknownTop", "unknown top-level member unknownTop", w(unknownTop=1)),
        ("bucket_seconds", "unknown top-level member bucket_seconds (snake case)", w(bucket_seconds=900)),
        ("Version", "unknown top-level member Version beside version", w(Version=1)),
        ("version", "version missing", w(version=DROP)),
        ("version", "version 2", w(version=2)),
        ("version", "version 0", w(version=0)),
        ("version", "version the string \"1\"", w(version="1")),
        ("version", "version 1.5", w(version=1.5)),
        ("version", "version true", w(version=True)),
        ("name", "name is a number", w(name=5)),
        ("bucketSeconds", "bucketSeconds 0", w(bucketSeconds=0)),
        ("bucketSeconds", "bucketSeconds -900", w(bucketSeconds=-900)),
        ("bucketSeconds", "bucketSeconds 31536001 (one past a year)", w(bucketSeconds=31536001)),
        ("bucketSeconds", "bucketSeconds 900.5", w(bucketSeconds=900.5)),
        ("bucketSeconds", "bucketSeconds the string \"900\"", w(bucketSeconds="900")),
        ("keyHexLength", "keyHexLength 31", w(keyHexLength=31)),
        ("keyHexLength", "keyHexLength 65", w(keyHexLength=65)),
        ("keyHexLength", "keyHexLength 0", w(keyHexLength=0)),
        ("keyHexLength", "keyHexLength 40.5", w(keyHexLength=40.5)),
        ("keyHexLength", "keyHexLength the string \"64\"", w(keyHexLength="64")),
        ("actionTypes", "actionTypes empty array", w(actionTypes=[])),
        ("actionTypes", "actionTypes a string, not an array", w(actionTypes="pix.send")),
        ("actionTypes", "actionTypes an object", w(actionTypes={"pix.send": True})),
        ("actionTypes.1", "actionTypes with an empty string at index 1", w(actionTypes=["pix.send", ""])),
        ("actionTypes.1", "actionTypes with a number at index 1", w(actionTypes=["pix.send", 5])),
        ("actionTypes.1", "actionTypes with a duplicate at index 1", w(actionTypes=["pix.send", "pix.send"])),
        ("actionTypes.0", "actionTypes with null at index 0", w(actionTypes=[None])),
        ("actionTypes.2", "actionTypes with an array at index 2", w(actionTypes=["a", "b", ["c"]])),
        ("fields", "fields missing", w(fields=DROP)),
        ("fields", "fields an array", w(fields=[])),
        ("fields", "fields a string", w(fields="amount")),
        ("fields", "fields null", w(fields=None)),
        ("fields.x", "field spec is a string", fx("key")),
        ("fields.x", "field spec is null", fx(None)),
        ("fields.x", "field spec is an array", fx(["key", "text"])),
        ("fields.", "field with an empty name", fx({"class": "ignored"}, name="")),
        ("fields.x.class", "field spec without class", fx({"normalizer": "text"})),
        ("fields.x.class", "unknown class primary", fx({"class": "primary", "normalizer": "text"})),
        ("fields.x.class", "class Key in upper case", fx({"class": "Key", "normalizer": "text"})),
        ("fields.x.class", "class is a number", fx({"class": 1})),
        ("fields.x.normalizer", "key class without normalizer", fx({"class": "key"})),
        ("fields.x.normalizer", "unknown normalizer lowercase", fx({"class": "key", "normalizer": "lowercase"})),
        ("fields.x.normalizer", "normalizer Text in upper case", fx({"class": "key", "normalizer": "Text"})),
        ("fields.x.normalizer", "normalizer is a number", fx({"class": "key", "normalizer": 1})),
        ("fields.x.extra", "unknown member extra in a key field spec", fx({"class": "key", "normalizer": "text", "extra": 1})),
        ("fields.x.extra", "unknown member extra in an ignored field spec", fx({"class": "ignored", "extra": True})),
        ("fields.x.note", "unknown member note in a fingerprint field spec", fx({"class": "fingerprint", "note": "x"})),
        ("fields.amount.scale", "decimal scale 19", amt(scale=19)),
        ("fields.amount.scale", "decimal scale -1", amt(scale=-1)),
        ("fields.amount.scale", "decimal scale 2.5", amt(scale=2.5)),
        ("fields.amount.scale", "decimal scale the string \"2\"", amt(scale="2")),
        ("fields.amount.rounding", "decimal rounding half-even", amt(rounding="half-even")),
        ("fields.amount.rounding", "decimal rounding HALF-UP in upper case", amt(rounding="HALF-UP")),
        ("fields.amount.rounding", "decimal rounding is a number", amt(rounding=1)),
    ]


def build_policy_custom():
    groups = []

    def add(comment, policy, cases, source="spec"):
        tests = [fields_test(c, policy_obj=policy, use_oracle=(source == "oracle"), where="policy_custom") for c in cases]
        groups.append(group("FieldsDerivation", comment, source, tests, policy=policy))

    add("payments policy (the spec's example): integer, exact, fingerprint and ignored fields, closed action types", P_PAYMENTS, f3_payments())
    add("short keys: keyHexLength 40, bucketSeconds 60, decimal scale 0, two action types", P_SHORT, f3_short())
    add("minimal policy: no name, keyHexLength 32, bucketSeconds 1, decimal scale 18", P_MIN, f3_min())
    sci = f3_scientific()
    for pol in (P_MIN, P_SCALE7):
        add("decimal scale >= 7: plain fixed-point notation where Python's str(Decimal) would use scientific form",
            pol, [c for p, c in sci if p is pol])
    add("non-ASCII field names; defaults for bucketSeconds, keyHexLength and scale", P_UNI, f3_unicode())
    add("the built-in default policy written out as JSON: keys equal the built-in default's (checked against the oracle)",
        DEFAULT_POLICY_JSON, f3_default_json(), source="oracle")
    inv = []
    for path, comment, policy in f3_policy_invalid():
        faults = policy_faults(policy)
        if [f[0] for f in faults] != [path]:
            raise GenError("policy_custom: %r: annotated errorPath %r, model faults %r" % (comment, path, faults))
        inv.append({"comment": comment, "flags": ["PolicyValidation"], "policy": policy, "result": "invalid",
                    "expectedError": "invalid-policy", "errorPath": path})
    groups.append(group("PolicyInvalid", "invalid policy documents: each wrong in exactly one way; errorPath is the dotted path of the offending entry", "spec", inv))
    header = ["Fields-mode keys under custom policies, and invalid policy documents.",
              "Expected values compose the oracle's normalizers (normalize_text, normalize_creditor_key, normalize_currency; decimal: format(Decimal(str(raw)).quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP), 'f'), plain notation at every scale, with negative zero canonicalized) with the policy's integer and exact rules.",
              "material = json.dumps([tenantId, actionType, body, intentEpoch // bucketSeconds], sort_keys=True, separators=(',', ':'), ensure_ascii=False); key = first keyHexLength hex digits of HMAC-SHA256(secret, material)."]
    return build_file("intentkey-fields-hmac-sha256", header, groups)


# ---------------------------------------------------------------------------
# File 4: intent-hmac
# ---------------------------------------------------------------------------
INTENT_LABEL = "intentkey/intent-hmac/v1"


def intent_test(comment, tenant, intent_id, klen=64, expect="valid", flags=(), secret=SECRET):
    faults = []
    check_secret(secret, faults)
    if tenant == "":
        faults.append(Fault("invalid-tenant-id", "empty"))
    if intent_id == "":
        faults.append(Fault("invalid-intent-id", "empty"))
    if not 32 <= klen <= 64:
        faults.append(Fault("invalid-key-length", "32..=64"))
    t = {"comment": comment, "flags": list(flags), "secretHex": secret.hex(), "tenantId": tenant,
         "intentId": intent_id, "keyHexLength": klen}
    if expect == "valid":
        if faults:
            raise GenError("intent_hmac: %r annotated valid, model: %s" % (comment, faults[0]))
        material = canonical([INTENT_LABEL, tenant, intent_id])
        t.update({"result": "valid", "material": material.decode("utf-8"), "key": mac(secret, material)[:klen]})
    else:
        if [f.code for f in faults] != [expect]:
            raise GenError("intent_hmac: %r annotated %s, model: %s" % (comment, expect, [str(f) for f in faults]))
        t.update({"result": "invalid", "expectedError": expect})
    return t


def build_intent_hmac():
    uid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    u = ["UnicodeId"]
    tests = [
        intent_test("ASCII tenant and UUID intent id, 64 hex", TENANT, uid, 64, flags=["Basic"]),
        intent_test("same input, 40 hex (Open Finance Brasil profile): a prefix of the 64-hex key", TENANT, uid, 40, flags=["KeyTruncation"]),
        intent_test("same input, 32 hex (the shortest allowed)", TENANT, uid, 32, flags=["KeyTruncation"]),
        intent_test("another intent id gives another key", TENANT, "0f8fad5b-d9cb-469f-a165-70867728950f", 64, flags=["Basic"]),
        intent_test("another tenant gives another key", "tenant-other", uid, 64, flags=["Basic"]),
        intent_test("numeric-looking intent id", TENANT, "42", 64, flags=["Basic"]),
        intent_test("one-character tenant and intent id", "t", "i", 64, flags=["Basic"]),
        intent_test("intent id with ç and ã (UTF-8, not escaped)", "loja-são-paulo", "pedido-ação-1", 64, flags=u),
        intent_test("intent id é precomposed U+00E9", TENANT, "caf\u00e9", 64, flags=u),
        intent_test("intent id e + U+0301 (no NFC: a different key)", TENANT, "cafe\u0301", 64, flags=u),
        intent_test("intent id with emoji U+1F600", TENANT, "order-\U0001F600", 40, flags=u + ["AstralChars"]),
        intent_test("tenant in CJK, intent id in Greek", "租户", "ΣΑΣ", 64, flags=u),
        intent_test("intent id is not case folded (upper case)", TENANT, uid.upper(), 64, flags=["Basic"]),
        intent_test("intent id with a quotation mark and a backslash", TENANT, "a\"b\\c", 64, flags=["JsonEscaping"]),
        intent_test("intent id with a newline and a tab", TENANT, "a\nb\tc", 64, flags=["JsonEscaping"]),
        intent_test("intent id with U+0000 and U+001F", TENANT, "a\x00b\x1fc", 32, flags=["JsonEscaping"]),
        intent_test("intent id with U+2028 and U+007F (not escaped)", TENANT, "a\u2028b\x7f", 64, flags=["JsonEscaping"]),
        intent_test("intent id with edge spaces (kept)", TENANT, "  id  ", 64, flags=["Basic"]),
        intent_test("intent id that looks like the label", TENANT, INTENT_LABEL, 64, flags=["Basic"]),
        intent_test("a 1000-character intent id", TENANT, "x" * 1000, 64, flags=["Basic"]),
        intent_test("secret of 64 bytes", TENANT, uid, 64, flags=["SecretLength"], secret=SECRET * 2),
        intent_test("secret of 33 bytes", TENANT, uid, 40, flags=["SecretLength"], secret=SECRET + b"\x00"),
        intent_test("empty tenant", "", uid, 64, "invalid-tenant-id"),
        intent_test("empty intent id", TENANT, "", 64, "invalid-intent-id"),
        intent_test("secret of 31 bytes", TENANT, uid, 64, "secret-too-short", secret=SECRET[:31]),
        intent_test("secret of 0 bytes", TENANT, uid, 64, "secret-too-short", secret=b""),
        intent_test("keyHexLength 31", TENANT, uid, 31, "invalid-key-length", ["KeyLength"]),
        intent_test("keyHexLength 65", TENANT, uid, 65, "invalid-key-length", ["KeyLength"]),
        intent_test("keyHexLength 0", TENANT, uid, 0, "invalid-key-length", ["KeyLength"]),
        intent_test("40 hex with a Unicode intent id", "loja-são-paulo", "pedido-ação-1", 40, flags=u + ["KeyTruncation"]),
    ]
    k64 = tests[0]["key"]
    assert tests[1]["key"] == k64[:40] and tests[2]["key"] == k64[:32]
    header = ["intent-hmac keys: HMAC-SHA256(secret, UTF-8 of json.dumps([\"intentkey/intent-hmac/v1\", tenantId, intentId], sort_keys=True, separators=(',', ':'), ensure_ascii=False)), first keyHexLength hex digits.",
              "tenantId and intentId are hashed verbatim (no normalization). keyHexLength must be 32..=64."]
    return build_file("intentkey-intent-hmac-sha256", header,
                      [group("IntentHmac", "keys for recorded intents, domain-separated from fields keys", "spec", tests)])


# ---------------------------------------------------------------------------
# File 5: fingerprints
# ---------------------------------------------------------------------------
FP_LABEL = "intentkey/fingerprint/v1"

P_FP = {"version": 1, "name": "orders",
        "fields": {"amount": {"class": "key", "normalizer": "decimal"},
                   "sku": {"class": "key", "normalizer": "exact"},
                   "note": {"class": "fingerprint"},
                   "meta": {"class": "fingerprint"},
                   "request_id": {"class": "ignored"}}}


def fingerprint_test(policy_obj, case, where):
    pol = load_policy(policy_obj)
    try:
        value = parse_strict(case.payload)
    except StrictJsonError as exc:
        raise GenError("%s: %r: payload not strict JSON: %s" % (where, case.comment, exc))
    faults = []
    check_secret(case.secret, faults)
    check_identity(pol, case.tenant, case.action, faults)
    body, canon, body_faults = model_body(pol, value, fingerprint=True)
    faults += body_faults
    if faults:
        outcome = Outcome(faults)
    else:
        material = canonical([FP_LABEL, case.tenant, case.action, body])
        outcome = Outcome([], material, mac(case.secret, material), canon)
    t = {"comment": case.comment, "flags": case.flags, "secretHex": case.secret.hex(),
         "tenantId": case.tenant, "actionType": case.action, "payload": case.payload}
    res = reconcile(case, outcome, None, where)
    if res["result"] == "valid":
        res["fingerprint"] = res.pop("key")
        res = {"result": "valid", "fingerprint": res["fingerprint"], "material": res["material"]}
    t.update(res)
    return t


def build_fingerprint():
    same, diff = "same", "differs"
    default_cases = [
        (None, sc("base payload: the four key fields, normalized", pl(), ["Basic"])),
        (same, sc("ignored field request_id added: same fingerprint as the base", pl(request_id="r-9"), ["IgnoredFieldNoEffect"])),
        (same, sc("all five ignored fields added: same fingerprint as the base", pl(request_id="r", attempt=3, trace_id="t", created_at="c", user_agent="u"), ["IgnoredFieldNoEffect"])),
        (same, sc("amount 150 (JSON integer) normalizes like \"150.00\": same fingerprint", pl(amount=150), ["Basic"])),
        (same, sc("remittance in upper case with edge spaces: same fingerprint", pl(remittance="  ALUGUEL DE MARÇO "), ["CaseFolding"])),
        (same, sc("currency \" brl \": same fingerprint", pl(currency=" brl "), ["CurrencyForm"])),
        (diff, sc("remittance absent: a different fingerprint", pl(remittance=DROP), ["MissingField"])),
        (diff, sc("another tenant: a different fingerprint", pl(), ["Basic"], tenant="tenant-other")),
        (diff, sc("another action type: a different fingerprint", pl(), ["Basic"], action="pix.refund")),
        (None, sc("amount JSON number 1.005 -> \"1.01\"", payload_with_raw("1.005"), ["FloatAmount"])),
        (None, sc("amount \"-0.001\" canonicalized to \"0.00\"", pl(amount="-0.001"), ["NegativeZeroCanonicalized"])),
        (None, sc("empty payload", "{}", ["MissingField"])),
        (None, sc("unclassified field memo", pl(memo="x"), "unclassified-fields", ["UnclassifiedField"])),
        (None, sc("amount \"NaN\"", pl(amount="NaN"), "invalid-decimal", ["MalformedDecimal"])),
        (None, sc("currency \"BRLX\"", pl(currency="BRLX"), "invalid-currency", ["CurrencyForm"])),
        (None, sc("creditor_key \"..-/\"", pl(creditor_key="..-/"), "invalid-pix-key", ["PixKeyForm"])),
        (None, sc("amount true", pl(amount=True), "invalid-field-type", ["FieldType"])),
        (None, sc("payload is an array", "[]", "invalid-payload", [])),
        (None, sc("secret of 31 bytes", pl(), "secret-too-short", [], secret=SECRET[:31])),
        (None, sc("empty tenant_id", pl(), "invalid-tenant-id", [], tenant="")),
    ]
    FB = {"amount": "12.50", "sku": "SKU-7", "note": "gift wrap", "meta": {"channel": "web"}, "request_id": "r-1"}

    def fb(**changes):
        d = dict(FB)
        for k, v in changes.items():
            if v is DROP:
                d.pop(k, None)
            else:
                d[k] = v
        return d

    ff = ["FingerprintField"]
    custom_cases = [
        (None, sc("base: key fields amount, sku; fingerprint fields note (string), meta (object)", fb(), ff)),
        (same, sc("ignored field request_id changed: same fingerprint as the base", fb(request_id="r-2"), ["IgnoredFieldNoEffect"])),
        (same, sc("ignored field request_id absent: same fingerprint as the base", fb(request_id=DROP), ["IgnoredFieldNoEffect"])),
        (same, sc("amount \"12.5\" normalizes like \"12.50\": same fingerprint", fb(amount="12.5"), ["DecimalString"])),
        (diff, sc("fingerprint field note changed: a different fingerprint", fb(note="no wrap"), ff)),
        (diff, sc("fingerprint field note in upper case (not normalized): a different fingerprint", fb(note="GIFT WRAP"), ff)),
        (diff, sc("fingerprint field note absent: a different fingerprint", fb(note=DROP), ff)),
        (diff, sc("fingerprint field meta with another value: a different fingerprint", fb(meta={"channel": "app"}), ff)),
        (None, sc("note JSON number 1.10 enters as 1.1 (Python float repr)", payload_text_with(fb(), "note", "1.10"), ff + ["FloatAmount"])),
        (None, sc("note JSON number 1e16 enters as 1e+16", payload_text_with(fb(), "note", "1e16"), ff + ["FloatAmount"])),
        (None, sc("note JSON number 1E2 enters as 100.0", payload_text_with(fb(), "note", "1E2"), ff + ["FloatAmount"])),
        (None, sc("note JSON number 1.0 enters as 1.0", payload_text_with(fb(), "note", "1.0"), ff + ["FloatAmount"])),
        (None, sc("note JSON number 0.1 enters as 0.1", payload_text_with(fb(), "note", "0.1"), ff + ["FloatAmount"])),
        (None, sc("note JSON number 5e-324 enters as 5e-324", payload_text_with(fb(), "note", "5e-324"), ff + ["FloatAmount"])),
        (None, sc("note JSON number 1.7976931348623157e308 enters as 1.7976931348623157e+308", payload_text_with(fb(), "note", "1.7976931348623157e308"), ff + ["FloatAmount"])),
        (None, sc("note JSON number -0.0 enters as -0.0", payload_text_with(fb(), "note", "-0.0"), ff + ["FloatAmount"])),
        (None, sc("note JSON number 0.000001 enters as 1e-06", payload_text_with(fb(), "note", "0.000001"), ff + ["FloatAmount"])),
        (None, sc("note JSON number 123456789.125 enters as 123456789.125", payload_text_with(fb(), "note", "123456789.125"), ff + ["FloatAmount"])),
        (None, sc("note JSON integer 123456789012345678901234567890 enters exactly", payload_text_with(fb(), "note", "123456789012345678901234567890"), ff + ["IntegerAmount"])),
        (None, sc("note JSON integer literal -0 enters as 0", payload_text_with(fb(), "note", "-0"), ff)),
        (None, sc("note null", fb(note=None), ff)),
        (None, sc("note true", fb(note=True), ff)),
        (None, sc("note an array of mixed values", payload_text_with(fb(), "note", "[1, 2.50, \"x\", null, false, {\"b\": 1, \"a\": 2}]"), ff)),
        (None, sc("meta object with unsorted keys is serialized sorted", fb(meta={"z": 1, "a": {"y": 2, "b": 3}, "m": []}), ff + ["MemberOrder"])),
        (same, sc("meta written in another member order: same fingerprint as the previous case", fb(meta={"m": [], "a": {"b": 3, "y": 2}, "z": 1}), ff + ["MemberOrder"])),
        (None, sc("meta keys sort by code point: \"ａ\" U+FF41 before \"😀\" U+1F600", fb(meta={"\U0001F600": 1, "\uff41": 2, "Z": 3, "é": 4}), ff + ["CodePointOrder"])),
        (None, sc("note string with controls, U+2028 and a quote", fb(note="a\x01\n\u2028\"b"), ff + ["JsonEscaping"])),
        (None, sc("note string not NFC-normalized (e + U+0301)", fb(note="cafe\u0301"), ff + ["Nfc"])),
        (None, sc("note with edge whitespace is not stripped", fb(note="  gift  "), ff)),
        (None, sc("meta nested 50 levels deep", fb(meta=nested(49, [])), ff)),
        (None, sc("only fingerprint fields", {"note": "x"}, ff)),
        (None, sc("amount JSON number 12.5 (key field) and note 12.5 (fingerprint field) print differently", js(fb(amount="__A__", note="__N__")).replace('"__A__"', "12.5").replace('"__N__"', "12.5"), ff + ["FloatAmount"])),
        (None, sc("unclassified field attempt", fb(attempt=1), "unclassified-fields", ["UnclassifiedField"])),
        (None, sc("sku is a number", fb(sku=7), "invalid-field-type", ["FieldType"])),
        (None, sc("amount \"1_000\"", fb(amount="1_000"), "invalid-decimal", ["MalformedDecimal"])),
    ]
    groups = []
    for comment, pol, cases in [("default policy: key fields normalized, ignored fields left out", None, default_cases),
                                ("custom policy with fingerprint-class fields", P_FP, custom_cases)]:
        tests = []
        first = prev = None
        for rel, case in cases:
            t = fingerprint_test(pol, case, "fingerprint")
            fp = t.get("fingerprint")
            if first is None:
                first = fp
            if rel == same and fp != (prev if "previous" in case.comment else first):
                raise GenError("fingerprint: %r claims the same fingerprint but differs" % case.comment)
            if rel == diff and (fp is None or fp == first):
                raise GenError("fingerprint: %r claims a different fingerprint" % case.comment)
            prev = fp
            tests.append(t)
        groups.append(group("Fingerprint", comment, "spec", tests, policy=pol))
    header = ["Request fingerprints: HMAC-SHA256(secret, UTF-8 of json.dumps([\"intentkey/fingerprint/v1\", tenantId, actionType, body], sort_keys=True, separators=(',', ':'), ensure_ascii=False)), 64 hex.",
              "body: each key-class field present -> its normalized string; each fingerprint-class field present -> its value as Python json.loads parsed it (floats print as Python repr); ignored fields left out. Key-field refusals apply with the same codes."]
    return build_file("intentkey-fingerprint-hmac-sha256", header, groups)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------
def dump(doc):
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


FILES = [
    ("fields_default_test.json", build_fields_default),
    ("request_lines_test.json", build_request_lines),
    ("policy_custom_test.json", build_policy_custom),
    ("intent_hmac_test.json", build_intent_hmac),
    ("fingerprint_test.json", build_fingerprint),
    ("uuid_test.json", file_uuid),
]


def main(argv=None):
    global ORACLE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oracle", help="path to seed_reference.py (default: %s)" % DEFAULT_ORACLE)
    ap.add_argument("--check", action="store_true", help="regenerate in memory; exit 1 if a committed file differs")
    args = ap.parse_args(argv)
    if args.oracle is None and not DEFAULT_ORACLE.is_file():
        if args.check:
            print("SKIPPED: vectors match their generator and the oracle (%s)" % ORACLE_ABSENT)
            return 0
        print("generate.py: FAILED: cannot write the vectors: %s; use --oracle PATH" % ORACLE_ABSENT, file=sys.stderr)
        return 2
    try:
        ORACLE = load_oracle(args.oracle or DEFAULT_ORACLE)
        produced = []
        for name, builder in FILES:
            doc, counts = builder()
            produced.append((name, dump(doc), counts))
    except GenError as exc:
        print("generate.py: FAILED: %s" % exc, file=sys.stderr)
        return 2
    total = 0
    differ = []
    for name, text, (n, v, i) in produced:
        total += n
        print("%-28s %4d tests  (%d valid, %d invalid)" % (name, n, v, i))
        path = HERE / name
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                differ.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    print("%-28s %4d tests" % ("total", total))
    if args.check:
        if differ:
            for name in differ:
                print("generate.py --check: %s differs from the generator's output; run python3 tests/vectors/generate.py" % name, file=sys.stderr)
            return 1
        print("all vector files are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
