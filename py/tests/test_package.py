"""The distribution: the wheel is pure Python (``py3-none-any``) and carries
both components and ``py.typed``; the package under test is that wheel,
installed; and a fresh virtualenv with nothing but the wheel (its one
dependency, wasmtime, from the index) derives the vectors' keys.

``scripts/test-py.sh`` builds the wheel and names it in ``INTENTKEY_WHEEL``;
run alone, this module builds one into a temporary directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import venv
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Dict, Iterator, Optional

import pytest

import intentkey

from conftest import REPO, VECTORS

COMPONENTS = ("intentkey/wasm/intentkey.wasm", "intentkey/wasm/intentkey-pure.wasm")
REQUIRED = COMPONENTS + ("intentkey/py.typed", "intentkey/__init__.py", "intentkey/__main__.py", "intentkey/cli.py",
                         "intentkey/demo.py")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("INTENTKEY_WHEEL")
    if given:
        path = Path(given)
        assert path.is_file(), f"INTENTKEY_WHEEL names no file: {given}"
        return path
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out),
                    str(REPO / "py")], check=True, timeout=600)
    wheels = list(out.glob("intentkey-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_is_pure_and_carries_the_components(wheel: Path) -> None:
    assert wheel.name.endswith("-py3-none-any.whl"), f"not a pure wheel: {wheel.name}"
    assert wheel.name.startswith(f"intentkey-{intentkey.__version__}-")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        missing = [n for n in REQUIRED if n not in names]
        assert not missing, f"{wheel.name} lacks {missing}"
        for name in COMPONENTS:
            data = zf.read(name)
            assert data[:4] == b"\0asm", f"{name} is not WebAssembly"
            assert len(data) > 100_000, f"{name} is only {len(data)} bytes"
            built = REPO / "dist" / Path(name).name
            if built.is_file():  # cargo xtask build-component writes dist/ and the package's copy together
                assert _digest(data) == _digest(built.read_bytes()), f"{name} differs from {built}: rebuild the component"
        # Nothing but the package and its metadata: no tests, no build leftovers, no native code.
        strays = [n for n in names if not (n.startswith("intentkey/") or n.startswith("intentkey-"))]
        assert not strays, f"files outside the package: {strays}"
        native = [n for n in names if n.endswith((".so", ".pyd", ".dylib", ".cwasm"))]
        assert not native, native
        dist_info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = zf.read(dist_info).decode("utf-8")
        required = [line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
        assert required == ["Requires-Dist: wasmtime==50.0.1"], required
        # Telemetry is an extra: opentelemetry-api only with intentkey[otel].
        assert "Provides-Extra: otel" in meta.splitlines()
        assert any(line.startswith("Requires-Dist: opentelemetry-api") and 'extra == "otel"' in line
                   for line in meta.splitlines()), meta
        wheel_tags = zf.read(dist_info.replace("METADATA", "WHEEL")).decode("utf-8")
        assert "Root-Is-Purelib: true" in wheel_tags and "Tag: py3-none-any" in wheel_tags
        entry = zf.read(dist_info.replace("METADATA", "entry_points.txt")).decode("utf-8")
        assert "intentkey-py = intentkey.cli:main" in entry


def test_the_package_under_test_is_the_installed_wheel(wheel: Path) -> None:
    if os.environ.get("INTENTKEY_TEST_SOURCE") == "1":
        pytest.skip("INTENTKEY_TEST_SOURCE=1: testing the source tree on purpose")
    where = Path(intentkey.__file__).resolve().parent
    assert "site-packages" in where.parts, where
    dist = metadata.distribution("intentkey")
    assert dist.version == intentkey.__version__
    files = {str(f).replace(os.sep, "/") for f in dist.files or []}
    for name in REQUIRED:
        assert name in files, f"the installed distribution lacks {name}"
    with zipfile.ZipFile(wheel) as zf:
        for name in COMPONENTS:
            installed = (where.parent / name).read_bytes()
            assert _digest(installed) == _digest(zf.read(name)), f"the installed {name} is not the wheel's"
    assert not (where / "wasm" / "intentkey.wasm").is_symlink()


def _first_intent_hmac_vector() -> Dict[str, object]:
    doc = json.loads((VECTORS / "intent_hmac_test.json").read_text(encoding="utf-8"))
    for group in doc["testGroups"]:
        for test in group["tests"]:
            if test["result"] == "valid" and test["keyHexLength"] == 64:
                return dict(test)
    raise AssertionError("no valid 64-hex intent-hmac vector")


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new virtualenv holding the wheel and what it depends on, nothing else."""
    root = tmp_path_factory.mktemp("fresh-venv")
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
                   check=True, timeout=900)
    yield python


def _run(python: Path, script: str, cwd: Path) -> str:
    done = subprocess.run([str(python), "-c", textwrap.dedent(script)], capture_output=True, timeout=300, cwd=cwd,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")})
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return done.stdout.decode("utf-8")


def test_a_fresh_venv_with_only_the_wheel_derives_a_key(fresh_venv: Path, tmp_path: Path) -> None:
    done = subprocess.run([str(fresh_venv), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                          capture_output=True, check=True, timeout=300)
    installed = {p["name"].lower() for p in json.loads(done.stdout)} - {"pip", "setuptools", "wheel"}
    assert installed == {"intentkey", "wasmtime"}, installed
    vector = _first_intent_hmac_vector()
    out = _run(fresh_venv, f"""
        import intentkey
        keyer = intentkey.Keyer(secret=bytes.fromhex({vector['secretHex']!r}))
        print(keyer.intent_key({vector['tenantId']!r}, {vector['intentId']!r}))
        print(len(keyer.derive("tenant-acme", "pix.send", {{"creditor_key": "12345678909", "amount": "10.50", "currency": "BRL"}}, 1_700_000_000)))
        print(intentkey.__file__)
    """, tmp_path)
    key, length, where = out.split("\n")[:3]
    assert key == vector["key"]
    assert length == "64"
    assert Path(where).resolve().is_relative_to(fresh_venv.parent.parent.resolve()), where


def _readme_asgi_example() -> str:
    """The Python block that follows the ``asgi-example`` marker in py/README.md, verbatim."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    marker = readme.index("<!-- asgi-example")
    start = readme.index("```python\n", marker) + len("```python\n")
    return readme[start:readme.index("```", start)]


def run_readme_asgi_example(python: Path, workdir: Path) -> None:
    """Runs the README's ASGI example, unchanged, with `python` (the fresh
    virtualenv's, which holds only the wheel and wasmtime) in `workdir`."""
    out = _run(python, _readme_asgi_example(), workdir)
    lines = out.splitlines()
    assert lines[0] == "(201, None, b'{\"id\": 1}')", out
    assert lines[1] == "(201, b'true', b'{\"id\": 1}')", out
    assert lines[2].startswith("(422, None, "), out


def test_the_readme_asgi_example_runs_in_the_fresh_venv(fresh_venv: Path, tmp_path: Path) -> None:
    run_readme_asgi_example(fresh_venv, tmp_path)
