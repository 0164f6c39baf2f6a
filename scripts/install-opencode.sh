#!/usr/bin/env bash
# Installs the pinned opencode CLI (vendor/opencode/package.json + package-lock.json) from the npm
# registry into vendor/opencode/node_modules (not committed), for the ACP lab recorder
# (supervisor/lab/acp_record_opencode.py). Idempotent: skips when the installed version already
# matches the lockfile. Never runs the binary: `opencode --version` is read from package.json.
set -euo pipefail
cd "$(dirname "$0")/../vendor/opencode"
pkg="opencode-ai"
want=$(node -p "require('./package-lock.json').packages['node_modules/$pkg'].version")
have=$(node -p "require('./node_modules/$pkg/package.json').version" 2>/dev/null || true)
if [ "$have" = "$want" ] && [ -x node_modules/.bin/opencode ]; then
  exit 0
fi
echo "installing pinned opencode $want" >&2
npm ci --no-audit --no-fund --loglevel=error >&2
test -x node_modules/.bin/opencode
