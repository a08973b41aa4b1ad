#!/usr/bin/env bash
# Runs compat/python/test_sdk.py with `apache-iggy==0.9.0` in a virtual environment under the
# repository's `.venv` (gitignored), made on first use. Needs the server binary (see the script).
set -euo pipefail
repository="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$repository/.venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("apache-iggy") == "0.9.0"' 2>/dev/null; then
    "$venv/bin/pip" install --quiet "apache-iggy==0.9.0"
fi
exec "$venv/bin/python" "$repository/compat/python/test_sdk.py"
