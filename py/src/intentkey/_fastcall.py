"""Compiled calls into the component: each function's type is read once.

wasmtime-py's ``component.Func.__call__`` reads the function's type from C on
every call (``func.type(store)``, ``.params``, ``.result``, and again for every
nested record, variant and option while converting), and converts ``list<u8>``
one byte at a time. :class:`CompiledFunc` reads an export's type once, through
the public type API, into per-type converters that write and read
``wasmtime_component_val_t`` directly, then calls
``wasmtime_component_func_call``. Values keep wasmtime-py's Python shapes
(``Record`` with kebab-case attributes, ``Variant`` where a variant is tagged,
``bytes`` for ``list<u8>``, ``ResourceAny``), so the rest of the package sees
no difference. :mod:`intentkey._fasthost` does the same for host imports.

It relies on wasmtime-py internals (``wasmtime._ffi``, ``Func._func``,
``Store._context()``, ``ResourceAny._consume()``, the exception hand-off of
``wasmtime.component._enter``), so :func:`supported` admits only the pinned
wasmtime version; any other version runs through plain wasmtime-py.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import os
from ctypes import byref
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

#: The wasmtime-py release these converters were written and tested against.
PINNED_WASMTIME = "50.0.1"


def supported() -> bool:
    """Whether the compiled path may run: the pinned wasmtime, and
    ``INTENTKEY_FASTPATH`` not set to ``0``."""
    if os.environ.get("INTENTKEY_FASTPATH", "1") == "0":
        return False
    try:
        return importlib.metadata.version("wasmtime") == PINNED_WASMTIME
    except importlib.metadata.PackageNotFoundError:
        return False


from wasmtime import WasmtimeError  # noqa: E402
from wasmtime.component import (  # noqa: E402
    F32, F64, S8, S16, S32, S64, U8, U16, U32, U64, Bool, BorrowType, Char, EnumType, ListType, OptionType,
    OwnType, Record, RecordType, ResourceAny, ResourceHost, ResultType, String, TupleType, ValType, Variant,
    VariantType,
)

ffi: Any = importlib.import_module("wasmtime._ffi")
_enter: Any = importlib.import_module("wasmtime.component._enter")
_types: Any = importlib.import_module("wasmtime.component._types")

VAL: Any = ffi.wasmtime_component_val_t
VALSIZE = ctypes.sizeof(VAL)
OF: int = VAL.of.offset  # where the payload union starts inside a val
K: Dict[str, int] = {name: int(getattr(ffi, f"WASMTIME_COMPONENT_{name}").value) for name in (
    "BOOL", "S8", "U8", "S16", "U16", "S32", "U32", "S64", "U64", "F32", "F64", "CHAR", "STRING", "LIST",
    "RECORD", "TUPLE", "VARIANT", "ENUM", "OPTION", "RESULT", "FLAGS", "RESOURCE")}
_BOOL = K["BOOL"]

# wasm_byte_vec_new with a prototype of our own that takes a Python bytes as is.
_byte_vec_new: Any = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)(
    ("wasm_byte_vec_new", ffi.dll))
_func_call: Any = getattr(ffi, "_wasmtime_component_func_call", ffi.wasmtime_component_func_call)
_val_delete: Any = ffi.wasmtime_component_val_delete
_val_new: Any = ffi.wasmtime_component_val_new
_val_clone: Any = ffi.wasmtime_component_val_clone
_vallist_new_uninit: Any = ffi.wasmtime_component_vallist_new_uninit
_valrecord_new_uninit: Any = ffi.wasmtime_component_valrecord_new_uninit
_valtuple_new_uninit: Any = ffi.wasmtime_component_valtuple_new_uninit
_resource_clone: Any = ffi.wasmtime_component_resource_any_clone
_string_at = ctypes.string_at
_memmove = ctypes.memmove

Lower = Callable[[Any, Any, Any], None]  # (store, python value, val) -> None; writes the val
Lift = Callable[[Any], Any]             # (val) -> python value; reads only, the caller frees the val


# -- which Python classes a type accepts (the untagged-variant rule) ------------
# The package's rule (``_binding``): an untagged option accepts None and its
# payload's classes, nothing else. Computed here on its own, so the compiled
# path decides as the patched wasmtime-py does without depending on the patch.

def _cases(ty: Any) -> List[Tuple[str, Optional[ValType]]]:
    cases: List[Tuple[str, Optional[ValType]]] = ty._cases()  # VariantType.cases, OptionType.payload, ResultType.ok/err
    return cases


def classes(ty: ValType) -> Set[type]:
    s: Set[type] = set()
    _add_classes(ty, s)
    return s


def _add_classes(ty: ValType, s: Set[type]) -> None:
    if isinstance(ty, (VariantType, OptionType, ResultType)):
        if tagged(ty):
            s.add(Variant)
        elif isinstance(ty, OptionType):
            s.add(type(None))
            _add_classes(ty.payload, s)
        else:
            for _, case in _cases(ty):
                if case is None:
                    s.add(object)
                else:
                    _add_classes(case, s)
    else:
        ty.add_classes(s)


def tagged(ty: Any) -> bool:
    """wasmtime-py's rule: a variant is tagged when two cases would accept the same class."""
    seen: Set[type] = set()
    for _, case_ty in _cases(ty):
        case: Set[type] = {object} if case_ty is None else classes(case_ty)
        if case & seen:
            return True
        seen |= case
    return False


# -- lowering: Python value -> C val ---------------------------------------------

def _abandon(c: Any, kind: int, data: Any, start: int, n: int) -> None:
    """Frees a half-written aggregate: its unwritten entries made empty first."""
    for j in range(start, n):
        data[j].kind = _BOOL
    c.kind = kind
    _val_delete(byref(c))
    c.kind = _BOOL


def compile_lower(ty: ValType) -> Lower:
    if isinstance(ty, String):
        k = K["STRING"]

        def lower_string(store: Any, v: Any, c: Any) -> None:
            if not isinstance(v, str):
                raise TypeError("expected string type")
            data = v.encode("utf-8")
            _byte_vec_new(byref(c, OF), len(data), data)
            c.kind = k
        return lower_string
    for cls, name, field in ((S64, "S64", "s64"), (U64, "U64", "u64"), (S32, "S32", "s32"), (U32, "U32", "u32"),
                             (S16, "S16", "s16"), (U16, "U16", "u16"), (S8, "S8", "s8"), (U8, "U8", "u8")):
        if isinstance(ty, cls):
            return _lower_int(K[name], field, name)
    if isinstance(ty, Bool):
        kb = K["BOOL"]

        def lower_bool(store: Any, v: Any, c: Any) -> None:
            if not isinstance(v, bool):
                raise TypeError("expected bool for Bool type")
            c.of.boolean = v
            c.kind = kb
        return lower_bool
    if isinstance(ty, EnumType):
        ke = K["ENUM"]
        names = {n: n.encode() for n in ty.names}

        def lower_enum(store: Any, v: Any, c: Any) -> None:
            data = names.get(v) if isinstance(v, str) else None
            if data is None:
                raise TypeError(f"expected one of {sorted(names)} for enum")
            _byte_vec_new(byref(c, OF), len(data), data)
            c.kind = ke
        return lower_enum
    if isinstance(ty, RecordType):
        return _lower_record(ty)
    if isinstance(ty, ListType):
        return _lower_list(ty)
    if isinstance(ty, TupleType):
        return _lower_tuple(ty)
    if isinstance(ty, (VariantType, OptionType, ResultType)):
        return _lower_variantlike(ty)
    if isinstance(ty, (OwnType, BorrowType)):
        kr = K["RESOURCE"]
        own = isinstance(ty, OwnType)

        def lower_resource(store: Any, v: Any, c: Any) -> None:
            if isinstance(v, ResourceAny):
                c.of.resource = v._consume() if own else _resource_clone(v.ptr())
            elif isinstance(v, ResourceHost):
                c.of.resource = v.to_any(store)._consume()
            else:
                raise TypeError("expected ResourceAny or ResourceHost for a resource type")
            c.kind = kr
        return lower_resource
    # f32, f64, char, flags: wasmtime-py's own conversion (none is on a hot path)
    def lower_other(store: Any, v: Any, c: Any) -> None:
        ty.convert_to_c(store, v, ctypes.pointer(c))
    return lower_other


def _lower_int(k: int, field: str, name: str) -> Lower:
    def lower_int(store: Any, v: Any, c: Any) -> None:
        if not isinstance(v, int):
            raise TypeError(f"expected int for {name} type")
        setattr(c.of, field, v)
        c.kind = k
    return lower_int


class Lowered(Record):
    """A record lowered once: its C value is kept and cloned (one C call) on
    every later lowering. It shares the attribute dict of the record it wraps,
    so it reads and compares like it; neither may be mutated afterwards (the
    kept C value would be stale). Plain wasmtime-py lowers it as a Record."""

    __slots__ = ("_c",)

    def __init__(self, rec: Record):
        self.__dict__ = rec.__dict__
        self._c: Any = None

    def __del__(self, _delete: Any = _val_delete, _byref: Any = byref) -> None:
        # (the C functions bound as defaults: at interpreter exit the module's globals may be gone)
        c, self._c = getattr(self, "_c", None), None
        if c is not None:
            _delete(_byref(c))


def _lower_record(ty: RecordType) -> Lower:
    k = K["RECORD"]
    fields = [(name, name.encode(), compile_lower(fty)) for name, fty in ty.fields]
    n = len(fields)

    def lower_fields(store: Any, v: Any, c: Any) -> None:
        raw = c.of.record
        _valrecord_new_uninit(byref(raw), n)
        data = raw.data
        i = 0
        try:
            for name, encoded, low in fields:
                e = data[i]
                e.name.size = 0
                e.name.data = None
                low(store, getattr(v, name), e.val)
                _byte_vec_new(byref(e.name), len(encoded), encoded)
                i += 1
        except BaseException:
            for j in range(i, n):
                e = data[j]
                e.val.kind = _BOOL
                e.name.size = 0
                e.name.data = None
            c.kind = k
            _val_delete(byref(c))
            c.kind = _BOOL
            raise
        c.kind = k

    def lower_record(store: Any, v: Any, c: Any) -> None:
        if type(v) is Lowered:
            kept = v._c
            if kept is None:
                kept = VAL()
                lower_fields(store, v, kept)
                v._c = kept
            _val_clone(byref(kept), byref(c))
            return
        lower_fields(store, v, c)
    return lower_record


def _lower_tuple(ty: TupleType) -> Lower:
    k = K["TUPLE"]
    elems = [compile_lower(e) for e in ty.elements]
    n = len(elems)

    def lower_tuple(store: Any, v: Any, c: Any) -> None:
        if not isinstance(v, tuple):
            raise TypeError("expected tuple type")
        if len(v) != n:
            raise TypeError("tuple length mismatch")
        raw = c.of.tuple
        _valtuple_new_uninit(byref(raw), n)
        data = raw.data
        i = 0
        try:
            for low, e in zip(elems, v):
                low(store, e, data[i])
                i += 1
        except BaseException:
            _abandon(c, k, data, i, n)
            raise
        c.kind = k
    return lower_tuple


def _lower_list(ty: ListType) -> Lower:
    k = K["LIST"]
    elem = ty.element
    if isinstance(elem, U8):
        # list<u8>: one strided copy of the bytes into the vals, not a loop per byte
        template = bytearray(VALSIZE)
        template[0] = K["U8"]
        one = bytes(template)

        def lower_bytes(store: Any, v: Any, c: Any) -> None:
            if not isinstance(v, (bytes, bytearray)):
                raise TypeError("expected bytes value")
            n = len(v)
            raw = c.of.list
            _vallist_new_uninit(byref(raw), n)
            if n:
                buf = bytearray(one * n)
                buf[OF::VALSIZE] = v
                _memmove(raw.data, bytes(buf), n * VALSIZE)
            c.kind = k
        return lower_bytes
    low = compile_lower(elem)

    def lower_list(store: Any, v: Any, c: Any) -> None:
        if not isinstance(v, list):
            raise TypeError("expected list value")
        n = len(v)
        raw = c.of.list
        _vallist_new_uninit(byref(raw), n)
        data = raw.data
        i = 0
        try:
            for e in v:
                low(store, e, data[i])
                i += 1
        except BaseException:
            _abandon(c, k, data, i, n)
            raise
        c.kind = k
    return lower_list


Case = Tuple[str, bytes, Optional[Lower], Tuple[type, ...]]


def _lower_variantlike(ty: Any) -> Lower:
    is_tagged = tagged(ty)
    cases: List[Case] = []
    for name, cty in _cases(ty):
        cases.append((name, name.encode(), None if cty is None else compile_lower(cty),
                      () if cty is None else tuple(classes(cty))))
    by_tag = {case[0]: case for case in cases}
    kind = K["OPTION"] if isinstance(ty, OptionType) else K["RESULT"] if isinstance(ty, ResultType) else K["VARIANT"]

    def pick(v: Any) -> Tuple[Case, Any]:
        if is_tagged:
            if not isinstance(v, Variant):
                raise TypeError("expected Variant type")
            case = by_tag.get(v.tag)
            if case is None:
                raise ValueError("value not valid for this variant")
            return case, v.payload
        for case in cases:
            if case[2] is None:
                if v is None:
                    return case, None
            elif isinstance(v, case[3]):
                return case, v
        raise ValueError("value not valid for this variant")

    def lower_variant(store: Any, v: Any, c: Any) -> None:
        (name, encoded, low, _), payload = pick(v)
        ptr = None
        if low is not None:
            inner = VAL()
            low(store, payload, inner)
            ptr = _val_new(byref(inner))  # moves the payload into a boxed val
        if kind == K["OPTION"]:
            c.of.option = ptr
        elif kind == K["RESULT"]:
            r = c.of.result
            r.is_ok = name == "ok"
            r.val = ptr
        else:
            var = c.of.variant
            _byte_vec_new(byref(var.discriminant), len(encoded), encoded)
            var.val = ptr
        c.kind = kind
    return lower_variant


# -- lifting: reads only; the caller frees the whole value once -----------------

def compile_lift(ty: ValType) -> Lift:
    if isinstance(ty, String):
        def lift_string(c: Any) -> Any:
            s = c.of.string
            return _string_at(s.data, s.size).decode("utf-8")
        return lift_string
    for cls, field in ((S64, "s64"), (U64, "u64"), (S32, "s32"), (U32, "u32"), (S16, "s16"), (U16, "u16"),
                       (S8, "s8"), (U8, "u8"), (F32, "f32"), (F64, "f64")):
        if isinstance(ty, cls):
            return _lift_field(field)
    if isinstance(ty, Bool):
        return lambda c: bool(c.of.boolean)
    if isinstance(ty, Char):
        return lambda c: chr(c.of.character)
    if isinstance(ty, EnumType):
        names = {n.encode(): n for n in ty.names}

        def lift_enum(c: Any) -> Any:
            s = c.of.enumeration
            return names[_string_at(s.data, s.size)]
        return lift_enum
    if isinstance(ty, RecordType):
        fields = [(name, compile_lift(fty)) for name, fty in ty.fields]

        def lift_record(c: Any) -> Any:
            ret = Record()
            data = c.of.record.data
            d = ret.__dict__
            for i, (name, lift) in enumerate(fields):
                d[name] = lift(data[i].val)
            return ret
        return lift_record
    if isinstance(ty, TupleType):
        elems = [compile_lift(e) for e in ty.elements]

        def lift_tuple(c: Any) -> Any:
            data = c.of.tuple.data
            return tuple(lift(data[i]) for i, lift in enumerate(elems))
        return lift_tuple
    if isinstance(ty, ListType):
        elem = ty.element
        if isinstance(elem, U8):
            def lift_bytes(c: Any) -> Any:
                raw = c.of.list
                n = raw.size
                return _string_at(raw.data, n * VALSIZE)[OF::VALSIZE] if n else b""
            return lift_bytes
        lift_e = compile_lift(elem)

        def lift_list(c: Any) -> Any:
            raw = c.of.list
            data = raw.data
            return [lift_e(data[i]) for i in range(raw.size)]
        return lift_list
    if isinstance(ty, (VariantType, OptionType, ResultType)):
        return _lift_variantlike(ty)
    if isinstance(ty, (OwnType, BorrowType)):
        def lift_resource(c: Any) -> Any:
            r = ResourceAny._from_ptr(ffi.take_pointer(c.of, "resource"))
            c.kind = _BOOL  # taken: the final delete must not free it
            return r
        return lift_resource

    def lift_other(c: Any) -> Any:  # flags: wasmtime-py's conversion (it frees what it reads: a copy)
        tmp = VAL()
        _val_clone(byref(c), byref(tmp))
        return ty.convert_from_c(tmp)
    return lift_other


def _lift_field(field: str) -> Lift:
    def lift_number(c: Any) -> Any:
        return getattr(c.of, field)
    return lift_number


def _lift_variantlike(ty: Any) -> Lift:
    is_tagged = tagged(ty)
    cases: Dict[bytes, Tuple[str, Optional[Lift]]] = {}
    for name, cty in _cases(ty):
        cases[name.encode()] = (name, None if cty is None else compile_lift(cty))
    if isinstance(ty, OptionType):
        some = cases[b"some"][1]
        assert some is not None

        def lift_option(c: Any) -> Any:
            p = c.of.option
            if not p:
                return Variant("none") if is_tagged else None
            v = some(p.contents)
            return Variant("some", v) if is_tagged else v
        return lift_option
    if isinstance(ty, ResultType):
        ok = cases[b"ok"][1]
        err = cases[b"err"][1]

        def lift_result(c: Any) -> Any:
            r = c.of.result
            tag, lift = ("ok", ok) if r.is_ok else ("err", err)
            if lift is None:
                return Variant(tag) if is_tagged else None
            v = lift(r.val.contents)
            return Variant(tag, v) if is_tagged else v
        return lift_result

    def lift_variant(c: Any) -> Any:
        var = c.of.variant
        d = var.discriminant
        tag, lift = cases[_string_at(d.data, d.size)]
        if lift is None:
            return Variant(tag) if is_tagged else None
        v = lift(var.val.contents)
        return Variant(tag, v) if is_tagged else v
    return lift_variant


# -- exports ------------------------------------------------------------------------

class CompiledFunc:
    """``func(store, *args)`` of an export, its type read once (per instance)."""

    __slots__ = ("_raw", "_lowers", "_lift", "_n", "_arr", "name")

    def __init__(self, func: Any, store: Any, name: str = "?"):
        fty = func.type(store)
        params = fty.params
        result = fty.result
        self._raw = byref(func._func)
        self._lowers = [compile_lower(t) for _, t in params]
        self._lift: Optional[Lift] = None if result is None else compile_lift(result)
        self._n = len(params)
        self._arr = VAL * max(self._n, 1)
        self.name = name

    def __call__(self, store: Any, *args: Any) -> Any:
        n = self._n
        if len(args) != n:
            raise TypeError(f"wrong number of parameters provided: given {len(args)}, expected {n}")
        buf = self._arr()
        i = 0
        try:
            for low, a in zip(self._lowers, args):
                low(store, a, buf[i])
                i += 1
            if self._lift is None:
                err = _func_call(self._raw, store._context(), buf, n, None, 0)
                if err:
                    _raise(err)
                return None
            res = VAL()
            err = _func_call(self._raw, store._context(), buf, n, byref(res), 1)
            if err:
                _raise(err)
            try:
                return self._lift(res)
            finally:
                _val_delete(byref(res))
        finally:
            for j in range(i):
                _val_delete(byref(buf[j]))


def _raise(err: Any) -> None:
    error = WasmtimeError._from_ptr(err)
    _enter.maybe_raise_last_exn()  # an exception out of a host import, as Func.__call__ re-raises it
    raise error
