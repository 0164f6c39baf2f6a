#!/usr/bin/env bash
# Installs the pinned Gemini CLI (vendor/gemini/package.json + vendor/gemini/package-lock.json)
# from the npm registry into vendor/gemini/node_modules (not committed), for the ACP lab
# (python -m supervisor.lab.acp_record_gemini). A separate npm project, so the other vendor
# installs are untouched. Idempotent: skips when the installed version matches the lockfile.
set -euo pipefail
cd "$(dirname "$0")/../vendor/gemini"
pkg="@google/gemini-cli"
want=$(node -p "require('./package-lock.json').packages['node_modules/$pkg'].version")
have=$(node -p "require('./node_modules/$pkg/package.json').version" 2>/dev/null || true)
if [ "$have" = "$want" ] && [ -x node_modules/.bin/gemini ]; then
  exit 0
fi
echo "installing pinned gemini-cli $want" >&2
npm ci --no-audit --no-fund --loglevel=error >&2
test -x node_modules/.bin/gemini
