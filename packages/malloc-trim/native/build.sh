#!/bin/sh
# Builds native/malloc-trim.node (the package's install script; also run by deploy's bundle).
# Needs a C compiler and the Node-API headers, which every Node install carries under
# <prefix>/include/node (no download). Without either, it says so and builds nothing: the
# agent then runs without trimming (@flotilla/malloc-trim's mallocTrim is undefined), as on a
# C library other than glibc. The test suite requires the addon on Linux with glibc.
set -eu
cd "$(dirname "$0")"
include="$(node -p 'require("node:path").resolve(process.execPath, "../../include/node")')"
if [ ! -f "$include/node_api.h" ]; then
  echo "@flotilla/malloc-trim: no Node-API headers in $include: not built (the agent will not trim its C heap)" >&2
  exit 0
fi
for compiler in "${CC:-}" cc gcc clang; do
  if [ -n "$compiler" ] && command -v "$compiler" >/dev/null 2>&1; then
    # Node-API symbols are resolved from the node binary when the addon is loaded.
    exec "$compiler" -O2 -std=c11 -Wall -Wextra -Werror -shared -fPIC -I"$include" -o malloc-trim.node malloc-trim.c
  fi
done
echo "@flotilla/malloc-trim: no C compiler (cc, gcc, clang): not built (the agent will not trim its C heap)" >&2
