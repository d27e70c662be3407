#!/bin/sh
# Builds the production bundle of one process into <out-dir>, what the image's runtime stage
# copies: the process as one JavaScript file (deploy/bundle.ts, esbuild; ctrl's bundle also
# has the migrate and pki commands), its source map, and a node_modules with what the bundle
# leaves out: the packages with a native addon (better-sqlite3) and the workspace packages, for
# their files (@flotilla/malloc-trim's addon, the console's assets).
#   deploy/build-bundle.sh <ctrl|agent|k8s-emulator|cli> <out-dir> [pnpm deploy flags, e.g. --offline]
# Run from the repository root (needs pnpm). deploy/Dockerfile and the production-bundle test
# (packages/deploy/test/bundle.test.ts) both run this script, so they cannot drift apart.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 <ctrl|agent|k8s-emulator|cli> <out-dir> [pnpm deploy flags]" >&2; exit 2; }
app=$1
out=$2
shift 2

# The CLI is one file with no native module: it needs no node_modules.
if [ "$app" = cli ]; then
  mkdir -p "$out"
  node deploy/bundle.ts packages/cli/src/main.ts "$out/flotilla.mjs"
  exit 0
fi

# The production dependencies (pruned below), flat (node-linker=hoisted), so that the bundle at the root
# resolves each external package from <out>/node_modules. pnpm 10's deploy copies ("injects")
# workspace packages only with inject-workspace-packages; set for this command alone, the
# workspace keeps its links.
pnpm --config.inject-workspace-packages=true --config.node-linker=hoisted --filter "@flotilla/$app" deploy --prod "$@" "$out"
# The app's own files are replaced by its bundle.
find "$out" -mindepth 1 -maxdepth 1 ! -name node_modules -exec rm -rf {} +

# Native addons (@flotilla/malloc-trim): pnpm deploy runs no script of an injected workspace
# package, so each package's native/build.sh runs here, for the Node that runs this script.
for build in "$out"/node_modules/@flotilla/*/native/build.sh; do
  [ -e "$build" ] && sh "$build"
done

node deploy/bundle.ts "packages/$app/src/main.ts" "$out/main.mjs"
if [ "$app" = ctrl ]; then
  # `node /app/migrate.mjs` applies the migrations alone; `node /app/pki.mjs` makes certificates.
  node deploy/bundle.ts packages/store/src/migrate-cli.ts "$out/migrate.mjs"
  node deploy/bundle.ts packages/ctrl/src/pki-cli.ts "$out/pki.mjs"
fi
# What the bundles inlined leaves node_modules.
node deploy/prune-node-modules.ts "$out"
