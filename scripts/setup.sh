#!/usr/bin/env bash
# Create or refresh .venv from uv.lock; a no-op when it is already up to date.
# Used by `make setup` and by the Dockerfile, so the image and the dev env are the same set.
# Extra arguments go to `uv sync` (the Dockerfile passes --no-dev --no-editable [--extra gpu]).
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9   # keep equal to [tool.uv] required-version in pyproject.toml
VENV=${UV_PROJECT_ENVIRONMENT:-.venv}
STAMP="$VENV/.tfx-tabular-synced"

is_py310() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' >/dev/null 2>&1; }

find_python() {
  local candidate
  for candidate in "${PYTHON:-}" "$(command -v python3.10 || true)" \
      $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10*/bin/python3.10 2>/dev/null | sort -V -r) \
      /usr/local/bin/python3.10 /usr/bin/python3.10; do
    if [ -n "$candidate" ] && is_py310 "$candidate"; then echo "$candidate"; return 0; fi
  done
  return 1
}

want="$(cat uv.lock pyproject.toml scripts/setup.sh | sha256sum | cut -d" " -f1) $*"
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi

if ! PY=$(find_python); then
  cat >&2 <<MSG
setup: Python 3.10 not found (looked at \$PYTHON, python3.10 on PATH, pyenv's versions folder,
/usr/local/bin and /usr/bin). TFX 1.16 needs CPython 3.10: install it, e.g. 'pyenv install 3.10'
or your distribution's python3.10 package, or point PYTHON=/path/to/python3.10 at one.
MSG
  exit 1
fi

UV_DIR=".tools/uv-$UV_VERSION"
if [ ! -x "$UV_DIR/bin/uv" ]; then
  echo "setup: installing uv $UV_VERSION into $UV_DIR"
  "$PY" -m pip install --quiet --disable-pip-version-check --target "$UV_DIR" "uv==$UV_VERSION"
fi

echo "setup: syncing $VENV from uv.lock with $PY"
# --compile-bytecode: with PYTHONDONTWRITEBYTECODE set (as here and in the image) nothing would
# ever write .pyc files, and every process (Beam workers, tests) would recompile its imports.
UV_LINK_MODE=copy "$UV_DIR/bin/uv" sync --frozen --compile-bytecode --python "$PY" "$@"
if [ $# -eq 0 ]; then
  # `make setup`, the dev environment: compile the conversion's numba kernels now rather than in
  # the first conversion. (The Dockerfile runs the same command itself, for a portable target.)
  "$VENV/bin/python" -m tfx_tabular.statistics.precompile
fi
echo "$want" > "$STAMP"
