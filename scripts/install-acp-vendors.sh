#!/usr/bin/env bash
# Installs the pinned ACP agents (vendor/acp/package.json + vendor/acp/package-lock.json) from
# the npm registry into vendor/acp/node_modules (not committed). A separate npm project, so the
# main vendor install (scripts/install-vendors.sh) is untouched. Idempotent: skips when the
# installed version already matches the lockfile.
set -euo pipefail
cd "$(dirname "$0")/../vendor/acp"
# package → its binary under node_modules/.bin
agents=("@zed-industries/claude-agent-acp claude-agent-acp" "@zed-industries/codex-acp codex-acp")
current=1
wanted=()
for entry in "${agents[@]}"; do
  read -r pkg bin <<<"$entry"
  want=$(node -p "require('./package-lock.json').packages['node_modules/$pkg'].version")
  have=$(node -p "require('./node_modules/$pkg/package.json').version" 2>/dev/null || true)
  wanted+=("$bin $want")
  if [ "$have" != "$want" ] || [ ! -x "node_modules/.bin/$bin" ]; then
    current=0
  fi
done
if [ "$current" = 1 ]; then
  exit 0
fi
echo "installing pinned ACP agents: ${wanted[*]}" >&2
npm ci --no-audit --no-fund --loglevel=error >&2
for entry in "${agents[@]}"; do
  read -r _ bin <<<"$entry"
  test -x "node_modules/.bin/$bin"
done
