#!/bin/sh
# Prints the path of the Gitea binary that the forge tests use (package
# internal/testkit/giteatest), building it first if it is not cached yet.
#
# Gitea v1.26.0 builds from the Go module proxy: the module is downloaded and
# built inside its folder in the module cache with the sqlite tags (without
# them it starts and then refuses SQLite). Needs Go and a C compiler; takes
# about 6 minutes and 1.4 GB of memory once; the 109 MB binary is cached
# outside the repository and never committed.
#
# Built without the bindata tag (which needs the frontend toolchain), the
# binary reads its options (translations, README and .gitignore templates)
# and templates from files: they are copied from the module into
# "<binary>-static" (~13 MB), which giteatest passes as STATIC_ROOT_PATH.
# Without them Gitea stops at start ("translation is missing for task").
#
# Usage: BALLET_GITEA=$(scripts/gitea.sh) go test ./internal/forge/...
set -eu

version=v1.26.0
module=code.gitea.io/gitea
bindir="${XDG_CACHE_HOME:-$HOME/.cache}/ballet/bin"
bin="$bindir/gitea-$version"
static="$bin-static"

if [ -x "$bin" ] && [ -d "$static/options" ] && [ -d "$static/templates" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$bindir"
# Run outside any module or workspace so the caller's go.mod does not matter.
cd /
GOWORK=off GOFLAGS=-mod=mod go mod download "$module@$version" >&2
src="$(go env GOMODCACHE)/$module@$version"
if [ ! -d "$src" ]; then
	echo "gitea.sh: $module@$version not found at $src after download" >&2
	exit 1
fi

# Copy into a temporary folder and rename it, so that half-copied files are
# never used.
if [ ! -d "$static/options" ] || [ ! -d "$static/templates" ]; then
	tmpdir=$(mktemp -d "$bindir/.gitea-$version-static.XXXXXX")
	cp -R "$src/options" "$src/templates" "$tmpdir/"
	chmod -R u+w "$tmpdir"
	rm -rf "$static"
	mv "$tmpdir" "$static"
fi

if [ ! -x "$bin" ]; then
	echo "building gitea $version into $bin (about 6 minutes) ..." >&2
	# Build into a temporary file next to the target and rename it, so that a
	# half-built binary is never used.
	tmp=$(mktemp "$bindir/.gitea-$version.XXXXXX")
	trap 'rm -f "$tmp"' EXIT INT TERM
	(cd "$src" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=1 go build -tags 'sqlite sqlite_unlock_notify' -o "$tmp" .) >&2
	chmod 755 "$tmp"
	mv -f "$tmp" "$bin"
	trap - EXIT INT TERM
fi
echo "$bin"
