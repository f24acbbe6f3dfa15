"""The component's core module, called through the canonical ABI directly.

wasmtime-py's component API converts every argument and result through the C
API's ``wasmtime_component_val_t`` trees (one ctypes object per field, a name
allocated per record field) and wasmtime's dynamic value lowering. jco, for
JavaScript, does not: it takes the component apart and calls its core module,
lowering values straight into linear memory. This module does the same for
Python:

* :func:`main_module` takes the component's main core module (the one that
  exports ``memory`` and ``cabi_realloc``) out of the component binary;
* :class:`Canon` reads the component's export and import types once, through
  wasmtime-py's public type API, and compiles for each function converters
  that follow the canonical ABI (flattening, memory layout, ``cabi_realloc``
  for every string and list handed in, ``cabi_post_*`` after every result);
* :class:`CanonInstance` instantiates the core module in wasmtime's core API,
  with each host import a core function (the same Python callable
  ``func(store, *args)`` as for the component API) and the resource
  intrinsics (``[resource-new]``, ``[resource-drop]``) backed by a handle
  table of its own.

Values keep wasmtime-py's Python shapes (``Record`` with kebab-case
attributes, ``Variant`` where a variant is tagged, ``bytes`` for
``list<u8>``, resources as :class:`CanonResource`, a ``ResourceAny``), so the
rest of the package sees no difference. Nothing here decides anything: the
rules are the component's. Core calls go through
``wasmtime_func_call_unchecked`` with argument arrays typed once, which relies
on wasmtime's C API as the pinned wasmtime-py exposes it, so the package uses
this path only with that version (``_binding.fastpath_supported``).
"""

from __future__ import annotations

import ctypes
import importlib
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from wasmtime import Engine, FuncType as CoreFuncType, Linker as CoreLinker, Module, Trap, ValType as CoreValType
from wasmtime import WasmtimeError
from wasmtime.component import (
    S8, S16, S32, S64, U8, U16, U32, U64, Bool, BorrowType, Component, EnumType, ListType, OptionType, OwnType,
    Record, RecordType, ResourceAny, ResultType, String, TupleType, ValType, Variant, VariantType,
)
from wasmtime.component import ComponentInstanceType, FuncType as ComponentFuncType
from wasmtime.component import ResourceType

ffi: Any = importlib.import_module("wasmtime._ffi")

RAW: Any = ffi.wasmtime_val_raw
RAWSIZE = ctypes.sizeof(RAW)
# Prototypes of our own over wasmtime's C API, taking addresses as plain
# integers (wasmtime-py's are typed pointers, checked on every call); they
# are new function objects, so wasmtime-py's own stay as they are.
_vp, _sz = ctypes.c_void_p, ctypes.c_size_t
_call_unchecked: Any = ctypes.CFUNCTYPE(_vp, _vp, _vp, _vp, _sz, _vp)(("wasmtime_func_call_unchecked", ffi.dll))
_memory_data: Any = ctypes.CFUNCTYPE(_vp, _vp, _vp)(("wasmtime_memory_data", ffi.dll))
_memory_size: Any = ctypes.CFUNCTYPE(_sz, _vp, _vp)(("wasmtime_memory_data_size", ffi.dll))
_caller_context: Any = ctypes.CFUNCTYPE(_vp, _vp)(("wasmtime_caller_context", ffi.dll))
_set_fuel: Any = ctypes.CFUNCTYPE(_vp, _vp, ctypes.c_uint64)(("wasmtime_context_set_fuel", ffi.dll))
_CALLBACK: Any = ctypes.CFUNCTYPE(_sz, _vp, _vp, _vp, _sz)
_NO_FINALIZER: Any = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(0)
_define_unchecked: Any = ctypes.CFUNCTYPE(_vp, _vp, ctypes.c_char_p, _sz, ctypes.c_char_p, _sz, _vp, _CALLBACK, _vp,
                                          ctypes.CFUNCTYPE(None, ctypes.c_void_p))(
    ("wasmtime_linker_define_func_unchecked", ffi.dll))
_TRAP_TYPE: Any = ctypes.POINTER(ffi.wasm_trap_t)
_ERROR_TYPE: Any = ctypes.POINTER(ffi.wasmtime_error_t)


def _address(ptr: Any) -> int:
    return ctypes.cast(ptr, ctypes.c_void_p).value or 0


def _slots(types: List[str]) -> "struct.Struct":
    """The layout of core values in an array of ``wasmtime_val_raw``."""
    return struct.Struct("<" + "".join("I12x" if t == "i32" else "Q8x" for t in types))

#: The canonical ABI's limits on flattened parameters and results.
MAX_FLAT_PARAMS = 16
MAX_FLAT_RESULTS = 1

_pack_into = struct.pack_into
_unpack_from = struct.unpack_from


class Unsupported(Exception):
    """A type this binding does not lower (floats, chars, flags): the caller
    falls back to wasmtime-py's component API."""


# -- the component binary ---------------------------------------------------------

def _leb(data: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def core_modules(component: bytes) -> List[bytes]:
    """The core modules embedded at the top level of a component binary."""
    if component[:4] != b"\0asm" or component[6:8] != b"\x01\x00":
        raise Unsupported("not a component binary")
    pos, modules = 8, []
    while pos < len(component):
        section = component[pos]
        size, pos = _leb(component, pos + 1)
        if section == 1:  # a core module, embedded as is
            modules.append(component[pos:pos + size])
        pos += size
    return modules


def main_module(engine: Engine, component: bytes) -> Module:
    """The component's main module: the one with ``memory`` and ``cabi_realloc``."""
    for data in sorted(core_modules(component), key=len, reverse=True):
        module = Module(engine, data)
        names = {e.name for e in module.exports}
        if "memory" in names and "cabi_realloc" in names:
            return module
    raise Unsupported("the component has no main module exporting memory and cabi_realloc")


# -- the untagged-variant rule (wasmtime-py's, with the package's option fix) ------

def _cases(ty: Any) -> List[Tuple[str, Optional[ValType]]]:
    cases: List[Tuple[str, Optional[ValType]]] = ty._cases()
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


# -- resources ----------------------------------------------------------------------

class CanonResource(ResourceAny):
    """A guest resource held by the host: its representation in the instance
    that made it. ``drop`` runs the guest's destructor once."""

    __slots__ = ("instance", "kind", "rep", "dropped")

    def __init__(self, instance: "CanonInstance", kind: "ResourceKind", rep: int):  # noqa: D107
        self.instance = instance
        self.kind = kind
        self.rep = rep
        self.dropped = False

    @property
    def owned(self) -> bool:
        return True

    def drop(self, store: Any = None) -> None:
        if self.dropped:
            raise ValueError("this resource was dropped already")
        self.dropped = True
        self.instance.destroy(self.kind, self.rep)

    def __repr__(self) -> str:
        return f"<CanonResource {self.kind.name} rep={self.rep}{' dropped' if self.dropped else ''}>"


class ResourceKind:
    """One exported resource type: its interface, name and destructor."""

    __slots__ = ("iface", "name", "rtype", "dtor")

    def __init__(self, iface: str, name: str, rtype: ResourceType):
        self.iface = iface
        self.name = name
        self.rtype = rtype
        self.dtor = f"{iface}#[dtor]{name}"


# -- compiled types -------------------------------------------------------------------
# Lowering is two phases: `lower`/`store` compute flat values and the bytes of
# each allocation (strings and lists get their memory from `cabi_realloc`,
# which may grow the memory), queued as writes; the instance then copies every
# queued write into linear memory at once. Lifting reads memory through a view
# refreshed after each guest call.

Writes = List[Tuple[int, Any]]
LowerFlat = Callable[[Any, Any, List[int], Writes], None]   # (cx, value, flat out, writes)
StoreMem = Callable[[Any, Any, bytearray, int, Writes], None]  # (cx, value, buffer, offset, writes)
LiftFlat = Callable[[Any, Sequence[int], int], Tuple[Any, int]]  # (cx, flat values, index) -> (value, next index)
LoadMem = Callable[[Any, Any, int], Any]                    # (cx, memory view, address) -> value


def _align(n: int, a: int) -> int:
    return (n + a - 1) & ~(a - 1)


def _join(a: str, b: str) -> str:
    if a == b:
        return a
    if {a, b} == {"i32", "f32"}:
        return "i32"
    return "i64"


class Codec:
    """The canonical ABI of one value type, compiled once."""

    __slots__ = ("size", "align", "flat", "lower", "store", "lift", "load")

    def __init__(self, size: int, align: int, flat: List[str], lower: LowerFlat, store: StoreMem,
                 lift: LiftFlat, load: LoadMem):
        self.size, self.align, self.flat = size, align, flat
        self.lower, self.store, self.lift, self.load = lower, store, lift, load


_INTS = (
    # class, size, signed, struct format
    (U8, 1, False, "<B"), (S8, 1, True, "<b"), (U16, 2, False, "<H"), (S16, 2, True, "<h"),
    (U32, 4, False, "<I"), (S32, 4, True, "<i"), (U64, 8, False, "<Q"), (S64, 8, True, "<q"),
)


class Compiler:
    """Compiles value types into codecs, knowing the component's resources."""

    def __init__(self, kinds: List[ResourceKind]):
        self.kinds = kinds

    def kind(self, rtype: ResourceType) -> ResourceKind:
        for k in self.kinds:
            if k.rtype == rtype:
                return k
        raise Unsupported("a resource type the component does not export")

    def codec(self, ty: ValType) -> Codec:
        if isinstance(ty, String):
            return _string_codec()
        if isinstance(ty, Bool):
            return _bool_codec()
        for cls, size, signed, fmt in _INTS:
            if isinstance(ty, cls):
                return _int_codec(size, signed, fmt)
        if isinstance(ty, EnumType):
            return _enum_codec(list(ty.names))
        if isinstance(ty, RecordType):
            fields = [(name, self.codec(fty)) for name, fty in ty.fields]
            return _record_codec(fields)
        if isinstance(ty, TupleType):
            return _tuple_codec([self.codec(e) for e in ty.elements])
        if isinstance(ty, ListType):
            elem = ty.element
            if isinstance(elem, U8):
                return _bytes_codec()
            return _list_codec(self.codec(elem))
        if isinstance(ty, (VariantType, OptionType, ResultType)):
            return self._variant(ty)
        if isinstance(ty, (OwnType, BorrowType)):
            return _resource_codec(self.kind(ty.ty), isinstance(ty, OwnType))
        raise Unsupported(f"no canonical lowering here for {type(ty).__name__}")

    def _variant(self, ty: Any) -> Codec:
        names: List[str] = []
        codecs: List[Optional[Codec]] = []
        accepts: List[Tuple[type, ...]] = []
        for name, cty in _cases(ty):
            names.append(name)
            codecs.append(None if cty is None else self.codec(cty))
            accepts.append(() if cty is None else tuple(classes(cty)))
        return _variant_codec(names, codecs, accepts, tagged(ty), isinstance(ty, OptionType),
                              isinstance(ty, ResultType))


def _utf8(v: Any) -> bytes:
    if not isinstance(v, str):
        raise TypeError(f"expected str, not {type(v).__name__}")
    return v.encode("utf-8")


def _octets(v: Any) -> bytes:
    if not isinstance(v, (bytes, bytearray)):
        raise TypeError(f"expected bytes, not {type(v).__name__}")
    return bytes(v)


def _string_codec() -> Codec:
    return _blob_codec(_utf8, lambda raw: raw.decode("utf-8"))


def _bytes_codec() -> Codec:
    return _blob_codec(_octets, lambda raw: raw)


def _pair_store(lower: LowerFlat) -> StoreMem:
    """Stores what `lower` flattens to a (pointer, length) pair."""
    def store(cx: Any, v: Any, buf: bytearray, off: int, writes: Writes) -> None:
        flat: List[int] = []
        lower(cx, v, flat, writes)
        _pack_into("<II", buf, off, flat[0], flat[1])
    return store


def _blob_codec(encode: Callable[[Any], bytes], decode: Callable[[bytes], Any]) -> Codec:
    """A string or a ``list<u8>``: (pointer, length) over bytes of its own
    allocation (the guest owns and frees it)."""
    def lower(cx: Any, v: Any, out: List[int], writes: Writes) -> None:
        data = encode(v)
        n = len(data)
        ptr = cx.realloc(1, n) if n else 1
        if n:
            writes.append((ptr, data))
        out.append(ptr)
        out.append(n)

    store = _pair_store(lower)

    def lift(cx: Any, vals: Sequence[int], i: int) -> Tuple[Any, int]:
        ptr, n = vals[i], vals[i + 1]
        return decode(cx.view()[ptr:ptr + n].tobytes()), i + 2

    def load(cx: Any, m: Any, addr: int) -> Any:
        ptr, n = _unpack_from("<II", m, addr)
        return decode(m[ptr:ptr + n].tobytes())
    return Codec(8, 4, ["i32", "i32"], lower, store, lift, load)


def _list_codec(elem: Codec) -> Codec:
    esize, ealign, estore, eload = elem.size, elem.align, elem.store, elem.load

    def lower(cx: Any, v: Any, out: List[int], writes: Writes) -> None:
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"expected a list, not {type(v).__name__}")
        n = len(v)
        if n == 0:
            out.append(ealign)
            out.append(0)
            return
        ptr = cx.realloc(ealign, n * esize)
        buf = bytearray(n * esize)
        off = 0
        for e in v:
            estore(cx, e, buf, off, writes)
            off += esize
        writes.append((ptr, buf))
        out.append(ptr)
        out.append(n)

    store = _pair_store(lower)

    def load(cx: Any, m: Any, addr: int) -> Any:
        ptr, n = _unpack_from("<II", m, addr)
        return [eload(cx, m, ptr + i * esize) for i in range(n)]

    def lift(cx: Any, vals: Sequence[int], i: int) -> Tuple[Any, int]:
        ptr, n = vals[i], vals[i + 1]
        m = cx.view()
        return [eload(cx, m, ptr + j * esize) for j in range(n)], i + 2
    return Codec(8, 4, ["i32", "i32"], lower, store, lift, load)


def _bool_codec() -> Codec:
    def lower(cx: Any, v: Any, out: List[int], writes: Writes) -> None:
        if not isinstance(v, bool):
            raise TypeError(f"expected bool, not {type(v).__name__}")
        out.append(1 if v else 0)

    def store(cx: Any, v: Any, buf: bytearray, off: int, writes: Writes) -> None:
        if not isinstance(v, bool):
            raise TypeError(f"expected bool, not {type(v).__name__}")
        buf[off] = 1 if v else 0

    def lift(cx: Any, vals: Sequence[int], i: int) -> Tuple[Any, int]:
        return vals[i] != 0, i + 1

    def load(cx: Any, m: Any, addr: int) -> Any:
        return m[addr] != 0
    return Codec(1, 1, ["i32"], lower, store, lift, load)


def _int_codec(size: int, signed: bool, fmt: str) -> Codec:
    bits = size * 8
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    flat_bits = 64 if size == 8 else 32
    mask = (1 << flat_bits) - 1
    half = 1 << (bits - 1)
    full = 1 << bits

    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"expected int, not {type(v).__name__}")
        if not lo <= v < hi:
            raise ValueError(f"{v} is out of range for a {'s' if signed else 'u'}{bits}")
        return v

    def lower(cx: Any, v: Any, out: List[int], writes: Writes) -> None:
        out.append(check(v) & mask)

    def store(cx: Any, v: Any, buf: bytearray, off: int, writes: Writes) -> None:
        _pack_into(fmt, buf, off, check(v))

    def lift(cx: Any, vals: Sequence[int], i: int) -> Tuple[Any, int]:
        v = vals[i] & (full - 1)
        if signed and v >= half:
            v -= full
        return v, i + 1

    def load(cx: Any, m: Any, addr: int) -> Any:
        return _unpack_from(fmt, m, addr)[0]
    return Codec(size, size, ["i64" if size == 8 else "i32"], lower, store, lift, load)


def _discriminant(n: int) -> Tuple[int, str]:
    if n <= 1 << 8:
        return 1, "<B"
    if n <= 1 << 16:
        return 2, "<H"
    return 4, "<I"


def _enum_codec(names: List[str]) -> Codec:
    index = {n: i for i, n in enumerate(names)}
    size, fmt = _discriminant(len(names))

    def number(v: Any) -> int:
        i = index.get(v) if isinstance(v, str) else None
        if i is None:
            raise TypeError(f"expected one of {sorted(names)} for an enum, not {v!r}")
        return i

    def lower(cx: Any, v: Any, out: List[int], writes: Writes) -> None:
        out.append(number(v))

    def store(cx: Any, v: Any, buf: bytearray, off: int, writes: Writes) -> None:
        _pack_into(fmt, buf, off, number(v))

    def lift(cx: Any, vals: Sequence[int], i: int) -> Tuple[Any, int]:
        return names[vals[i]], i + 1

    def load(cx: Any, m: Any, addr: int) -> Any:
        return names[_unpack_from(fmt, m, addr)[0]]
    return Codec(size, size, ["i32"], lower, store, lift, load)


def _record_layout(codecs: List[Codec]) -> Tuple[List[int], int, int]:
    offsets, off, align = [], 0, 1
    for c in codecs:
        off = _align(off, c.align)
        offsets.append(off)
        off += c.size
        align = max(align, c.align)
    return offsets, _align(off, align), align


def _record_codec(fields: List[Tuple[str, Codec]]) -> Codec:
    offsets, size, align = _record_layout([c for _, c in fields])
    flat = [t for _, c in fields for t in c.flat]
    plan = [(name, c.lower, c.store, c.lift, c.load, off) for (name, c), off in zip(fields, offsets)]

    def lower(cx: Any, v: Any, out: List[int], writes: Writes) -> None:
        for name, low, _, _, _, _ in plan:
            low(cx, getattr(v, name), out, writes)

    def store(cx: Any, v: Any, buf: bytearray, off: int, writes: Writes) -> None:
        for name, _, st, _, _, foff in plan:
            st(cx, getattr(v, name), buf, off + foff, writes)

    def lift(cx: Any, vals: Sequence[int], i: int) -> Tuple[Any, int]:
        rec = Record()
        d = rec.__dict__
        for name, _, _, lf, _, _ in plan:
            d[name], i = lf(cx, vals, i)
        return rec, i

    def load(cx: Any, m: Any, addr: int) -> Any:
        rec = Record()
        d = rec.__dict__
        for name, _, _, _, ld, foff in plan:
            d[name] = ld(cx, m, addr + foff)
        return rec
    return Codec(size, align, flat, lower, store, lift, load)


def _tuple_codec(elems: List[Codec]) -> Codec:
    offsets, size, align = _record_layout(elems)
    flat = [t for c in elems for t in c.flat]
    n = len(elems)
    plan = list(zip([c.lower for c in elems], [c.store for c in elems], [c.lift for c in elems],
                    [c.load for c in elems], offsets))

    def seq(v: Any) -> Any:
        if not isinstance(v, (tuple, list)) or len(v) != n:
            raise TypeError(f"expected a tuple of {n}, not {v!r}")
        return v

    def lower(cx: Any, v: Any, out: List[int], writes: Writes) -> None:
        for (low, _, _, _, _), e in zip(plan, seq(v)):
            low(cx, e, out, writes)

    def store(cx: Any, v: Any, buf: bytearray, off: int, writes: Writes) -> None:
        for (_, st, _, _, eoff), e in zip(plan, seq(v)):
            st(cx, e, buf, off + eoff, writes)

    def lift(cx: Any, vals: Sequence[int], i: int) -> Tuple[Any, int]:
        out = []
        for _, _, lf, _, _ in plan:
            e, i = lf(cx, vals, i)
            out.append(e)
        return tuple(out), i

    def load(cx: Any, m: Any, addr: int) -> Any:
        return tuple(ld(cx, m, addr + eoff) for _, _, _, ld, eoff in plan)
    return Codec(size, align, flat, lower, store, lift, load)


def _variant_codec(names: List[str], codecs: List[Optional[Codec]], accepts: List[Tuple[type, ...]],
                   is_tagged: bool, is_option: bool, is_result: bool) -> Codec:
    dsize, dfmt = _discriminant(len(names))
    payload_align = max([c.align for c in codecs if c is not None], default=1)
    payload_size = max([c.size for c in codecs if c is not None], default=0)
    align = max(dsize, payload_align)
    payload_off = _align(dsize, payload_align)
    size = _align(payload_off + payload_size, align)
    joined: List[str] = []
    for c in codecs:
        if c is None:
            continue
        for j, t in enumerate(c.flat):
            if j < len(joined):
                joined[j] = _join(joined[j], t)
            else:
                joined.append(t)
    flat = ["i32"] + joined
    width = len(joined)
    # Where a case's flat value sits in a wider (i64) slot, lifting wraps it back to 32 bits.
    narrow = [[t == "i32" and joined[j] == "i64" for j, t in enumerate(c.flat)] if c is not None else []
              for c in codecs]
    by_tag = {name: i for i, name in enumerate(names)}

    def pick(v: Any) -> Tuple[int, Any]:
        if is_tagged:
            if not isinstance(v, Variant):
                raise TypeError(f"expected a Variant of {names}, not {type(v).__name__}")
            i = by_tag.get(v.tag)
            if i is None:
                raise ValueError(f"{v.tag!r} is not a case of {names}")
            return i, v.payload
        for i, c in enumerate(codecs):
            if c is None:
                if v is None:
                    return i, None
            elif isinstance(v, accepts[i]):
                return i, v
        raise ValueError(f"{v!r} is not valid for a variant of {names}")

    def lower(cx: Any, v: Any, out: List[int], writes: Writes) -> None:
        i, payload = pick(v)
        out.append(i)
        c = codecs[i]
        start = len(out)
        if c is not None:
            c.lower(cx, payload, out, writes)
        out.extend([0] * (width - (len(out) - start)))

    def store(cx: Any, v: Any, buf: bytearray, off: int, writes: Writes) -> None:
        i, payload = pick(v)
        _pack_into(dfmt, buf, off, i)
        c = codecs[i]
        if c is not None:
            c.store(cx, payload, buf, off + payload_off, writes)

    def shape(i: int, payload: Any) -> Any:
        if is_tagged:
            return Variant(names[i]) if codecs[i] is None else Variant(names[i], payload)
        return payload

    def lift(cx: Any, vals: Sequence[int], i: int) -> Tuple[Any, int]:
        case = vals[i]
        if case >= len(names):
            raise ValueError(f"discriminant {case} is out of range for {names}")
        c = codecs[case]
        payload = None
        if c is not None:
            own = list(vals[i + 1:i + 1 + len(c.flat)])
            for j, wrap in enumerate(narrow[case]):
                if wrap:
                    own[j] &= 0xFFFFFFFF
            payload, _ = c.lift(cx, own, 0)
        return shape(case, payload), i + 1 + width

    def load(cx: Any, m: Any, addr: int) -> Any:
        case = _unpack_from(dfmt, m, addr)[0]
        if case >= len(names):
            raise ValueError(f"discriminant {case} is out of range for {names}")
        c = codecs[case]
        return shape(case, None if c is None else c.load(cx, m, addr + payload_off))
    return Codec(size, align, flat, lower, store, lift, load)


def _resource_codec(kind: ResourceKind, own: bool) -> Codec:
    def rep_of(cx: Any, v: Any) -> int:
        if not isinstance(v, CanonResource) or v.kind is not kind:
            raise TypeError(f"expected a {kind.name} resource, not {v!r}")
        if v.dropped or v.instance is not cx:
            raise ValueError(f"this {kind.name} belongs to a dropped resource or another instance")
        return v.rep

    def lower(cx: Any, v: Any, out: List[int], writes: Writes) -> None:
        rep = rep_of(cx, v)
        if own:  # moved into the guest: a handle in its table
            v.dropped = True
            out.append(cx.new_handle(kind, rep))
        else:  # a borrow of a resource the guest defines: its representation
            out.append(rep)

    def store(cx: Any, v: Any, buf: bytearray, off: int, writes: Writes) -> None:
        flat: List[int] = []
        lower(cx, v, flat, writes)
        _pack_into("<I", buf, off, flat[0])

    def take(cx: Any, handle: int) -> Any:
        if not own:
            raise ValueError("a borrow handed to the host")
        return CanonResource(cx, kind, cx.take_handle(kind, handle))

    def lift(cx: Any, vals: Sequence[int], i: int) -> Tuple[Any, int]:
        return take(cx, vals[i]), i + 1

    def load(cx: Any, m: Any, addr: int) -> Any:
        return take(cx, _unpack_from("<I", m, addr)[0])
    return Codec(4, 4, ["i32"], lower, store, lift, load)


# -- signatures -------------------------------------------------------------------------

class Signature:
    """A function's parameters and result, compiled once per component."""

    def __init__(self, compiler: Compiler, fty: ComponentFuncType):
        self.params = [compiler.codec(t) for _, t in fty.params]
        result = fty.result
        self.result: Optional[Codec] = None if result is None else compiler.codec(result)
        flat_params = [t for c in self.params for t in c.flat]
        self.indirect_params = len(flat_params) > MAX_FLAT_PARAMS
        offsets, size, align = _record_layout(self.params)
        self.param_offsets, self.param_size, self.param_align = offsets, size, align
        self.core_params = ["i32"] if self.indirect_params else flat_params
        flat_results = [] if self.result is None else self.result.flat
        self.indirect_result = len(flat_results) > MAX_FLAT_RESULTS
        self.core_results = ["i32"] if self.indirect_result else flat_results
        for t in self.core_params + self.core_results:
            if t not in ("i32", "i64"):
                raise Unsupported("floating-point core values")


def _core_type(t: str) -> CoreValType:
    return CoreValType.i32() if t == "i32" else CoreValType.i64()


def _component_funcs(engine: Engine, item: Any) -> Tuple[Dict[str, ComponentFuncType], Dict[str, ResourceType]]:
    funcs: Dict[str, ComponentFuncType] = {}
    resources: Dict[str, ResourceType] = {}
    item = item.ty
    if isinstance(item, ComponentInstanceType):
        for name, ext in item.exports(engine).items():
            sub = ext.ty
            if isinstance(sub, ComponentFuncType):
                funcs[name] = sub
            elif isinstance(sub, ResourceType):
                resources[name] = sub
    return funcs, resources


class Canon:
    """A component taken apart once: its main module and its compiled signatures."""

    def __init__(self, engine: Engine, component: Component, binary: bytes):
        self.engine = engine
        self.module = main_module(engine, binary)
        ctype = component.type
        kinds: List[ResourceKind] = []
        exports: Dict[str, Dict[str, ComponentFuncType]] = {}
        for iface, item in ctype.exports(engine).items():
            funcs, resources = _component_funcs(engine, item)
            exports[iface] = funcs
            kinds.extend(ResourceKind(iface, name, rtype) for name, rtype in resources.items())
        imports: Dict[str, Dict[str, ComponentFuncType]] = {}
        for iface, item in ctype.imports(engine).items():
            imports[iface] = _component_funcs(engine, item)[0]
        self.kinds = kinds
        compiler = Compiler(kinds)
        self.exports: Dict[Tuple[str, str], Signature] = {}
        for iface, funcs in exports.items():
            for name, fty in funcs.items():
                self.exports[(iface, name)] = Signature(compiler, fty)
        self.imports: Dict[Tuple[str, str], Signature] = {}
        for iface, funcs in imports.items():
            for name, fty in funcs.items():
                self.imports[(iface, name)] = Signature(compiler, fty)
        self.module_imports: List[Tuple[str, str]] = [(i.module, i.name or "") for i in self.module.imports]
        for module, name in self.module_imports:
            if module.startswith("[export]"):
                if not (name.startswith("[resource-new]") or name.startswith("[resource-drop]")):
                    raise Unsupported(f"the core module imports {module} {name}")
            elif (module, name) not in self.imports:
                raise Unsupported(f"the core module imports {module} {name}, which the component does not")

    def kind(self, iface: str, name: str) -> ResourceKind:
        for k in self.kinds:
            if k.iface == iface and k.name == name:
                return k
        raise Unsupported(f"{iface} exports no resource {name}")


# -- an instance ---------------------------------------------------------------------------

class CanonInstance:
    """The main module instantiated in one store, with its handle table."""

    def __init__(self, canon: Canon, store: Any, host: Dict[Tuple[str, str], Callable[..., Any]]):
        self.canon = canon
        self.store = store
        self.handles: Dict[int, Tuple[ResourceKind, int]] = {}
        self._next_handle = 1
        self.pending: Optional[BaseException] = None
        self._ctx: int = _address(store._context())
        self._callbacks: List[Any] = []  # kept alive as long as the instance
        self._view: Any = None
        self._view_size = -1
        self._bound: Dict[Tuple[str, str], "BoundFunc"] = {}
        linker = CoreLinker(canon.engine)
        for module, name in canon.module_imports:
            if module.startswith("[export]"):
                iface = module[len("[export]"):]
                if name.startswith("[resource-new]"):
                    kind = canon.kind(iface, name[len("[resource-new]"):])
                    self._define(linker, module, name, ["i32"], ["i32"], self._resource_new(kind))
                else:
                    kind = canon.kind(iface, name[len("[resource-drop]"):])
                    self._define(linker, module, name, ["i32"], [], self._resource_drop(kind))
            else:
                sig = canon.imports[(module, name)]
                func = host.get((module, name))
                if func is None:
                    raise Unsupported(f"no host function for {module} {name}")
                results = [] if sig.indirect_result else sig.core_results
                params = sig.core_params + (["i32"] if sig.indirect_result else [])
                self._define(linker, module, name, params, results, self._import(sig, func))
        self.instance = linker.instantiate(store, canon.module)
        exports = self.instance.exports(store)
        self._exports = exports
        memory: Any = exports["memory"]
        self._memory_obj = memory
        self._memory = ctypes.addressof(memory._memory)
        self._realloc = _Core(exports["cabi_realloc"], ["i32"] * 4, ["i32"])
        self._dtors: Dict[str, _Core] = {}

    def set_fuel(self, fuel: int) -> None:
        """``Store.set_fuel`` through the raw prototype (once per call)."""
        err = _set_fuel(self._ctx, fuel)
        if err:
            raise WasmtimeError._from_ptr(ctypes.cast(err, _ERROR_TYPE))

    # the memory
    def view(self) -> Any:
        """A view of linear memory as it is now (made again when it grew:
        linear memory moves only when it grows)."""
        size = _memory_size(self._ctx, self._memory)
        if size != self._view_size:
            base = _memory_data(self._ctx, self._memory)
            self._view = memoryview((ctypes.c_ubyte * size).from_address(base)).cast("B")
            self._view_size = size
        return self._view

    def realloc(self, align: int, size: int) -> int:
        ptr: int = self._realloc.call(self, (0, 0, align, size))[0]
        if ptr == 0:
            raise MemoryError(f"the guest could not allocate {size} bytes")
        return ptr

    def flush(self, writes: Writes) -> None:
        if writes:
            m = self.view()
            for ptr, data in writes:
                m[ptr:ptr + len(data)] = data

    # resources
    def new_handle(self, kind: ResourceKind, rep: int) -> int:
        h = self._next_handle
        self._next_handle += 1
        self.handles[h] = (kind, rep)
        return h

    def take_handle(self, kind: ResourceKind, handle: int) -> int:
        entry = self.handles.pop(handle, None)
        if entry is None or entry[0] is not kind:
            raise ValueError(f"handle {handle} is not a {kind.name} of this instance")
        return entry[1]

    def destroy(self, kind: ResourceKind, rep: int) -> None:
        """Runs the guest destructor of `rep`."""
        dtor = self._dtors.get(kind.dtor)
        if dtor is None:
            func = self._exports.get(kind.dtor)
            if func is None:
                return
            dtor = self._dtors[kind.dtor] = _Core(func, ["i32"], [])
        dtor.call(self, (rep,))

    def _resource_new(self, kind: ResourceKind) -> Callable[[List[int]], List[int]]:
        def run(args: List[int]) -> List[int]:
            return [self.new_handle(kind, args[0])]
        return run

    def _resource_drop(self, kind: ResourceKind) -> Callable[[List[int]], List[int]]:
        def run(args: List[int]) -> List[int]:
            self.destroy(kind, self.take_handle(kind, args[0]))
            return []
        return run

    # host imports
    def _import(self, sig: Signature, func: Callable[..., Any]) -> Callable[[List[int]], List[int]]:
        params, result = sig.params, sig.result
        offsets = sig.param_offsets

        def run(args: List[int]) -> List[int]:
            if sig.indirect_params:
                m = self.view()
                base = args[0]
                values = [c.load(self, m, base + off) for c, off in zip(params, offsets)]
                retptr = args[1] if sig.indirect_result else 0
            else:
                values, i = [], 0
                for c in params:
                    v, i = c.lift(self, args, i)
                    values.append(v)
                retptr = args[i] if sig.indirect_result else 0
            value = func(self.store, *values)
            if result is None:
                if value is not None:
                    raise TypeError("a host import without a result returned a value")
                return []
            writes: Writes = []
            if sig.indirect_result:
                buf = bytearray(result.size)
                result.store(self, value, buf, 0, writes)
                writes.append((retptr, buf))
                self.flush(writes)
                return []
            out: List[int] = []
            result.lower(self, value, out, writes)
            self.flush(writes)
            return out
        return run

    def _define(self, linker: CoreLinker, module: str, name: str, params: List[str], results: List[str],
                run: Callable[[List[int]], List[int]]) -> None:
        nresults = len(results)
        pslots, rslots = _slots(params), _slots(results)

        def trampoline(env: Any, caller: Any, raw: Any, count: Any) -> int:
            ctx = self._ctx
            self._ctx = _caller_context(caller)
            try:
                args = list(pslots.unpack(ctypes.string_at(raw, pslots.size))) if pslots.size else []
                out = run(args)
                if len(out) != nresults:
                    raise TypeError("a host import answered the wrong number of values")
                if nresults:
                    ctypes.memmove(raw, rslots.pack(*out), rslots.size)
                return 0
            except BaseException as exc:
                self.pending = exc
                return _address(Trap("python exception")._consume())
            finally:
                self._ctx = ctx

        callback = _CALLBACK(trampoline)
        self._callbacks.append(callback)
        fty = CoreFuncType([_core_type(t) for t in params], [_core_type(t) for t in results])
        self._callbacks.append(fty)
        m, nm = module.encode(), name.encode()
        err = _define_unchecked(_address(linker.ptr()), m, len(m), nm, len(nm), _address(fty.ptr()), callback, None,
                                _NO_FINALIZER)
        if err:
            raise WasmtimeError._from_ptr(ctypes.cast(err, _ERROR_TYPE))

    # exports
    def func(self, iface: str, name: str) -> Optional["BoundFunc"]:
        bound = self._bound.get((iface, name))
        if bound is None:
            sig = self.canon.exports.get((iface, name))
            core = self._exports.get(f"{iface}#{name}")
            if sig is None or core is None:
                return None
            post = self._exports.get(f"cabi_post_{iface}#{name}")
            bound = BoundFunc(self, sig, core, post, name)
            self._bound[(iface, name)] = bound
        return bound


class _Core:
    """A core function called through ``wasmtime_func_call_unchecked``."""

    __slots__ = ("func", "ref", "n", "arr", "addr", "block", "pslots", "rslots", "trap", "trapref")

    def __init__(self, func: Any, params: List[str], results: List[str]):
        self.func = func  # keeps the wasmtime_func_t alive
        self.ref = ctypes.addressof(func._func)
        self.n = max(len(params), len(results), 1)
        self.arr = (RAW * self.n)()
        self.addr = ctypes.addressof(self.arr)
        self.block = memoryview(self.arr).cast("B")
        self.pslots, self.rslots = _slots(params), _slots(results)
        self.trap = ctypes.c_void_p()
        self.trapref = ctypes.addressof(self.trap)

    def call(self, cx: CanonInstance, args: Any) -> Tuple[int, ...]:
        block = self.block
        self.pslots.pack_into(block, 0, *args)
        trap = self.trap
        trap.value = None
        err = _call_unchecked(cx._ctx, self.ref, self.addr, self.n, self.trapref)
        if err or trap.value:
            _failed(cx, err, trap.value)
        out: Tuple[int, ...] = self.rslots.unpack_from(block, 0)
        return out


def _failed(cx: CanonInstance, err: Optional[int], trap: Optional[int]) -> None:
    """Raises what a failed core call left: an exception out of a host
    import (as wasmtime-py re-raises it), else the trap or the error."""
    trap_obj = Trap._from_ptr(ctypes.cast(trap, _TRAP_TYPE)) if trap else None
    error = WasmtimeError._from_ptr(ctypes.cast(err, _ERROR_TYPE)) if err else None
    pending, cx.pending = cx.pending, None
    if pending is not None:
        raise pending
    if trap_obj is not None:
        raise trap_obj
    assert error is not None
    raise error


class BoundFunc:
    """``func(store, *args)`` of one export of one instance."""

    __slots__ = ("cx", "sig", "core", "post", "name", "nargs")

    def __init__(self, cx: CanonInstance, sig: Signature, core: Any, post: Any, name: str):
        self.cx = cx
        self.sig = sig
        self.core = _Core(core, sig.core_params, sig.core_results)
        self.post = None if post is None else _Core(post, sig.core_results, [])
        self.name = name
        self.nargs = len(sig.params)

    def __call__(self, store: Any, *args: Any) -> Any:
        cx, sig = self.cx, self.sig
        if len(args) != self.nargs:
            raise TypeError(f"{self.name} takes {self.nargs} arguments, not {len(args)}")
        writes: Writes = []
        flat: List[int] = []
        if sig.indirect_params:
            area = cx.realloc(sig.param_align, sig.param_size)
            buf = bytearray(sig.param_size)
            for c, off, a in zip(sig.params, sig.param_offsets, args):
                c.store(cx, a, buf, off, writes)
            writes.append((area, buf))
            flat.append(area)
        else:
            for c, a in zip(sig.params, args):
                c.lower(cx, a, flat, writes)
        cx.flush(writes)
        out = self.core.call(cx, flat)
        result = sig.result
        if result is None:
            value = None
        elif sig.indirect_result:
            value = result.load(cx, cx.view(), out[0])
        else:
            value = result.lift(cx, out, 0)[0]
        if self.post is not None:
            self.post.call(cx, out)
        return value
