#!/bin/sh
# Builds the production bundle of one process into <out-dir>: the app, its production
# dependencies and the workspace packages it uses, as JavaScript — what the image's runtime
# stage copies.
#   deploy/build-bundle.sh <ctrl|agent|k8s-emulator|cli> <out-dir> [pnpm deploy flags, e.g. --offline]
# Run from the repository root (needs pnpm and GNU realpath). deploy/Dockerfile and the production-bundle test
# (packages/deploy/test/bundle.test.ts) both run this script, so they cannot drift apart.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 <ctrl|agent|k8s-emulator|cli> <out-dir> [pnpm deploy flags]" >&2; exit 2; }
app=$1
out=$2
shift 2

# The CLI is one file (deploy/bundle.ts): it has no native module, and a command's cold start
# is most of its cost.
if [ "$app" = cli ]; then
  mkdir -p "$out"
  node deploy/bundle.ts packages/cli/src/main.ts "$out/flotilla.mjs"
  exit 0
fi

# pnpm 10's deploy copies ("injects") workspace packages (the files their package.json
# lists), which it does only with inject-workspace-packages; set for this command alone, the
# workspace keeps its links.
pnpm --config.inject-workspace-packages=true --filter "@flotilla/$app" deploy --prod "$@" "$out"

# The injected workspace packages sit under node_modules/.pnpm: move each to
# <out>/packages/<name> (where to-javascript.ts converts them, and where their sources are
# easy to find in the image), link it back, and give it a node_modules link to its own
# dependencies.
for package in "$out"/node_modules/.pnpm/@flotilla+*/node_modules/@flotilla/*; do
  [ -L "$package" ] || [ ! -e "$package" ] && continue # a dependency's link, or no match
  name=$(basename "$package")
  [ -e "$out/packages/$name" ] && { echo "$0: workspace package $name is injected twice" >&2; exit 1; }
  mkdir -p "$out/packages"
  mv "$package" "$out/packages/$name"
  ln -s "$(realpath --relative-to="$(dirname "$package")" "$out/packages/$name")" "$package"
  ln -s "$(realpath --relative-to="$out/packages/$name" "$(dirname "$(dirname "$package")")")" "$out/packages/$name/node_modules"
done

# Native addons (@flotilla/malloc-trim): pnpm deploy runs no script of an injected workspace
# package, so each package's native/build.sh runs here, for the Node that runs this script.
for build in "$out"/packages/*/native/build.sh; do
  [ -e "$build" ] && sh "$build"
done

# ctrl's store applies the repository's migrations/ (../../../migrations/ from its src/),
# which import the store's dependencies (kysely).
if [ "$app" = ctrl ]; then
  cp -R migrations "$out/migrations"
  ln -s ../packages/store/node_modules "$out/migrations/node_modules"
fi

# Types stripped at build time: a process that loads no .ts file never loads Node's
# TypeScript stripper (about 22 MB of the agent's RSS).
node --disable-warning=ExperimentalWarning deploy/to-javascript.ts "$out"
