#!/usr/bin/env bash
# Installs the pinned vendor CLIs (vendor/package.json + vendor/package-lock.json) from the npm
# registry into vendor/node_modules (ignored by git). Idempotent: skips when the installed
# versions already match the lockfile.
set -euo pipefail
cd "$(dirname "$0")/../vendor"
want_claude=$(node -p 'require("./package-lock.json").packages["node_modules/@anthropic-ai/claude-code"].version')
want_codex=$(node -p 'require("./package-lock.json").packages["node_modules/@openai/codex"].version')
have_claude=$(node_modules/.bin/claude --version 2>/dev/null | awk '{print $1}' || true)
have_codex=$(node_modules/.bin/codex --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have_claude" = "$want_claude" ] && [ "$have_codex" = "$want_codex" ]; then
  exit 0
fi
echo "installing pinned vendor CLIs: claude $want_claude, codex $want_codex" >&2
npm ci --no-audit --no-fund --loglevel=error >&2
node_modules/.bin/claude --version >/dev/null
node_modules/.bin/codex --version >/dev/null
