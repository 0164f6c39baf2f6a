#!/usr/bin/env bash
# Installs the pinned ACP agents (vendor/acp/package.json + vendor/acp/package-lock.json) from
# the npm registry into vendor/acp/node_modules (not committed). A separate npm project, so the
# main vendor install (scripts/install-vendors.sh) is untouched. Idempotent: skips when the
# installed version already matches the lockfile.
set -euo pipefail
cd "$(dirname "$0")/../vendor/acp"
pkg="@zed-industries/claude-agent-acp"
want=$(node -p "require('./package-lock.json').packages['node_modules/$pkg'].version")
have=$(node -p "require('./node_modules/$pkg/package.json').version" 2>/dev/null || true)
if [ "$have" = "$want" ] && [ -x node_modules/.bin/claude-agent-acp ]; then
  exit 0
fi
echo "installing pinned ACP agents: claude-agent-acp $want" >&2
npm ci --no-audit --no-fund --loglevel=error >&2
test -x node_modules/.bin/claude-agent-acp
