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
# Not `npm ci`: npm 11 refuses this lockfile as "out of sync" because it lists only the linux
# platform packages (opencode-ai names twelve optional per-platform binaries; the registry
# resolution recorded only the ones for this platform). `npm install --no-save` installs the
# locked versions with the locked integrity hashes and leaves package.json and the lock as
# they are; the version check below holds it to the pin.
npm install --no-save --no-audit --no-fund --loglevel=error >&2
have=$(node -p "require('./node_modules/$pkg/package.json').version")
if [ "$have" != "$want" ]; then
  echo "installed opencode $have, but the lockfile pins $want" >&2
  exit 1
fi
test -x node_modules/.bin/opencode
