#!/bin/sh
# Prints the path of the rqlited binary that the tests use (package
# internal/testkit/rqlitetest), building it first if it is not cached yet.
#
# `go install github.com/rqlite/rqlite/v8/cmd/rqlited@v8.43.4` does not work
# through a proxy that refuses to list versions, so the module is downloaded
# and built inside its folder in the module cache. Needs Go and a C compiler
# (rqlite uses cgo SQLite); takes about 90 s once.
#
# Usage: BALLET_RQLITED=$(scripts/rqlited.sh) go test ./...
set -eu

version=v8.43.4
module=github.com/rqlite/rqlite/v8
bindir="${XDG_CACHE_HOME:-$HOME/.cache}/ballet/bin"
bin="$bindir/rqlited-$version"

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$bindir"
echo "building rqlited $version into $bin (about 90 s) ..." >&2
# Run outside any module or workspace so the caller's go.mod does not matter.
cd /
GOWORK=off GOFLAGS=-mod=mod go mod download "$module@$version" >&2
src="$(go env GOMODCACHE)/$module@$version"
if [ ! -d "$src" ]; then
	echo "rqlited.sh: $module@$version not found at $src after download" >&2
	exit 1
fi

# Build into a temporary file next to the target and rename it, so that a
# half-built binary is never used.
tmp=$(mktemp "$bindir/.rqlited-$version.XXXXXX")
trap 'rm -f "$tmp"' EXIT INT TERM
(cd "$src" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=1 go build -o "$tmp" ./cmd/rqlited) >&2
chmod 755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT INT TERM
echo "$bin"
