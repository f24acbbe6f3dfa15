#!/usr/bin/env bash
# The Python package as users get it: a fresh virtualenv with the pinned dev
# requirements, the wheel built from py/ and installed (not editable), checked
# to be pure (py3-none-any) and to carry both components and py.typed, the
# installed package type-checked (mypy --strict), then pytest on py/tests run
# from outside the source tree so the installed copy is imported.
#
#   scripts/test-py.sh [pytest arguments…]
#
# INTENTKEY_PY_VENV overrides the virtualenv's place (default
# ${TMPDIR:-/tmp}/intentkey-py-venv; it is recreated on each run).
# The components must be in py/src/intentkey/wasm/ (cargo xtask build-component).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=${TMPDIR:-/tmp}
venv=${INTENTKEY_PY_VENV:-$tmp/intentkey-py-venv}
python=${PYTHON:-python3}
started=$SECONDS
phase() { printf '\n== %s\n' "$*"; }
fail() { printf 'test-py: FAILED: %s\n' "$*" >&2; exit 1; }

for component in intentkey.wasm intentkey-pure.wasm; do
    [ -s "$repo/py/src/intentkey/wasm/$component" ] \
        || fail "py/src/intentkey/wasm/$component is missing: run cargo xtask build-component (or copy dist/*.wasm there)"
done

phase "virtualenv $venv (requirements-dev.txt)"
t=$SECONDS
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$repo/py/requirements-dev.txt"
venv_s=$((SECONDS - t))

phase "wheel"
t=$SECONDS
work=$(mktemp -d "$tmp/intentkey-py-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Built from a clean copy of py/: no build/ or egg-info left over from an earlier build can slip in.
mkdir -p "$work/py"
(cd "$repo/py" && tar --exclude=./build --exclude='*.egg-info' --exclude=__pycache__ --exclude=.pytest_cache -cf - .) \
    | (cd "$work/py" && tar -xf -)
"$venv/bin/python" -m build --wheel --outdir "$work/dist" "$work/py" >"$work/build.log" 2>&1 \
    || { cat "$work/build.log" >&2; fail "the wheel did not build"; }
shopt -s nullglob
wheels=("$work"/dist/intentkey-*.whl)
shopt -u nullglob
[ "${#wheels[@]}" -eq 1 ] || fail "expected one wheel, found ${#wheels[@]}"
wheel=${wheels[0]}
case "$(basename "$wheel")" in
    *-py3-none-any.whl) ;;
    *) fail "the wheel is not pure: $(basename "$wheel")" ;;
esac
"$venv/bin/python" - "$wheel" <<'PY' || fail "the wheel lacks package data"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["intentkey/wasm/intentkey.wasm", "intentkey/wasm/intentkey-pure.wasm", "intentkey/py.typed"]
missing = [n for n in need if n not in names]
if missing:
    sys.exit(f"{sys.argv[1]} lacks {missing}")
PY
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$wheel"
"$venv/bin/python" -m pip check >/dev/null || fail "pip check: the installed requirements conflict"
location=$(cd "$work" && "$venv/bin/python" -c 'import intentkey, os; print(os.path.dirname(intentkey.__file__))')
case "$location" in
    "$venv"/*/site-packages/intentkey) ;;
    *) fail "intentkey imports from $location, not from the virtualenv's site-packages" ;;
esac
wheel_s=$((SECONDS - t))
echo "$(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) installed at $location"

phase "mypy --strict (the installed package's files)"
t=$SECONDS
# mypy does not report errors in site-packages: it checks a copy of the installed files.
mkdir -p "$work/typecheck"
cp -R "$location" "$work/typecheck/intentkey"
(cd "$work/typecheck" && "$venv/bin/mypy" --strict --no-incremental --cache-dir /dev/null -p intentkey) \
    || fail "mypy --strict found errors"
mypy_s=$((SECONDS - t))

phase "pytest py/tests (from $work, against the installed wheel)"
t=$SECONDS
status=0
(cd "$work" && INTENTKEY_WHEEL="$wheel" "$venv/bin/python" -m pytest -p no:cacheprovider \
    --rootdir "$repo/py" -c "$repo/py/pyproject.toml" -q -ra "$@" "$repo/py/tests") | tee "$work/pytest.log" \
    || status=$?
pytest_s=$((SECONDS - t))
result=$({ grep -E ' in [0-9.]+s( \([0-9:]+\))?( =+)?$' "$work/pytest.log" || true; } | tail -1 | sed -E 's/^=+ //; s/ =+$//')
[ "$status" -eq 0 ] || fail "pytest: ${result:-exit status $status}"

printf '\ntest-py: %s; wheel %s pure with both components and py.typed; mypy --strict clean (venv %ss, wheel %ss, mypy %ss, pytest %ss, total %ss)\n' \
    "$result" "$(basename "$wheel")" "$venv_s" "$wheel_s" "$mypy_s" "$pytest_s" "$((SECONDS - started))"
