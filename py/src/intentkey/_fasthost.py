"""Host imports of the component with their types read once.

wasmtime-py's ``LinkerInstance.add_func`` trampoline rebuilds the import's
function type, its parameter and result types and every nested record or
variant type on each call, and converts ``list<u8>`` one byte at a time.
:func:`add_func` registers the same Python callable ``func(store, *args)``
through wasmtime's C API with a trampoline that compiles the import's type on
its first call (:mod:`intentkey._fastcall`) and reuses it; Python values keep
wasmtime-py's shapes.

An exception out of ``func`` is handed to wasmtime-py's own mechanism
(``wasmtime.component._enter.catch_exceptions``): the guest call fails, and
the export call re-raises it in the caller. wasmtime's C API drops the
argument values after the callback and takes the result values it was given,
so the trampoline only reads the arguments and writes fresh results.
"""

from __future__ import annotations

import ctypes
import importlib
from typing import Any, Callable, List, Optional

from wasmtime import WasmtimeError
from wasmtime.component import FuncType

from ._fastcall import Lift, Lower, compile_lift, compile_lower

ffi: Any = importlib.import_module("wasmtime._ffi")
_enter: Any = importlib.import_module("wasmtime.component._enter")


class _Host:
    __slots__ = ("func", "lifts", "lower")

    def __init__(self, func: Callable[..., Any]):
        self.func = func
        self.lifts: Optional[List[Lift]] = None
        self.lower: Optional[Lower] = None


# Entries live in wasmtime-py's own slab of host functions and are released by
# its own finalizer, so they are torn down exactly as wasmtime-py's are
# (including at interpreter exit, when a store outlives this module).
_linker_mod: Any = importlib.import_module("wasmtime.component._linker")
_FUNCTIONS: Any = _linker_mod.FUNCTIONS
_func_finalize: Any = _linker_mod.func_finalize


def _call(entry: _Host, ty_raw: Any, args: Any, results: Any) -> Callable[[Any], None]:
    def run(store: Any) -> None:
        lifts = entry.lifts
        if lifts is None:  # first call: read the import's type once
            fty = FuncType._from_ptr(ty_raw, owner=store)
            result = fty.result
            entry.lower = None if result is None else compile_lower(result)
            entry.lifts = lifts = [compile_lift(t) for _, t in fty.params]
        value = entry.func(store, *[lift(args[i]) for i, lift in enumerate(lifts)])
        lower = entry.lower
        if lower is None:
            if value is not None:
                raise TypeError("a host import without a result returned a value")
        else:
            lower(store, value, results[0])
    return run


def _trampoline_impl(idx: Any, context: Any, ty_raw: Any, args: Any, nargs: Any, results: Any, nresults: Any) -> Any:
    entry = _FUNCTIONS.get(idx or 0)
    return _enter.catch_exceptions(context, _call(entry, ty_raw, args, results))


_trampoline: Any = ffi.wasmtime_component_func_callback_t(_trampoline_impl)
_linker_mod._intentkey_trampoline = _trampoline  # kept alive as long as wasmtime-py's own callbacks


def add_func(linker_instance: Any, name: str, func: Callable[..., Any]) -> None:
    """``linker_instance.add_func(name, func)`` with the compiled trampoline."""
    linker_instance._assert_not_locked()
    idx = _FUNCTIONS.allocate(_Host(func))
    encoded = name.encode("utf-8")
    err = ffi.wasmtime_component_linker_instance_add_func(
        linker_instance.ptr(), ctypes.create_string_buffer(encoded), len(encoded), _trampoline, idx, _func_finalize)
    if err:
        raise WasmtimeError._from_ptr(err)
