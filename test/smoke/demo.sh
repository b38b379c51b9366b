#!/usr/bin/env bash
# The README's demo (test/demo.sh) against the dbgate that test/check.sh has
# just installed: it fails if admit / queue / reject or dbgate.status do not
# behave as the demo shows them.
set -euo pipefail
exec bash "${DBGATE_SRC:?run from test/check.sh}/test/demo.sh" --no-install
