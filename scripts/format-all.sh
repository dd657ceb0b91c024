#!/usr/bin/env bash
# Formats the whole tree once, in one commit, after the branches that edit src/, test/, bench/ and
# scripts/ have merged: deletes the "Not formatted yet" block of .prettierignore (from then on
# `npm run lint` checks every file), applies ESLint's mechanical fixes (type-only imports,
# prefer-const) and Prettier, checks, commits, and records the commit in .git-blame-ignore-revs so
# `git blame` skips it. Behaviour does not change: Prettier and these fixes never change what runs.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git diff --quiet || ! git diff --cached --quiet; then
  echo "format-all: commit or stash your changes first" >&2
  exit 1
fi
# Everything from the marker line to the end of the file goes.
sed -i '/^# Not formatted yet/,$d' .prettierignore
sed -i -e :a -e '/^\n*$/{$d;N;ba' -e '}' .prettierignore
npx eslint --fix . || true
npx prettier --write . --log-level warn
npm run typecheck
npm run lint:code
git commit -qam "Format the whole tree with Prettier (.prettierrc.json) and ESLint's mechanical fixes; no behaviour change

scripts/format-all.sh made this commit; .git-blame-ignore-revs lists it for git blame."
git rev-parse HEAD >> .git-blame-ignore-revs
git add .git-blame-ignore-revs
git commit -qm "git blame skips the formatting commit (.git-blame-ignore-revs; git config blame.ignoreRevsFile .git-blame-ignore-revs)"
git log --oneline -2
