#!/bin/sh
# Prints the path of the Mailpit binary (a real SMTP server with a REST API
# that lists the messages it received) that the mail tests use (package
# internal/testkit/mailtest), building it first if it is not cached yet.
# It is also the easiest way to see Ballet's mail locally (README.md).
#
# The binary is built once, with `go install` pinned to one version, into a
# cache outside the repository. Needs Go; takes about a minute once.
#
# Usage: BALLET_MAILPIT=$(scripts/mailpit.sh) go test ./internal/notify/...
set -eu

version=v1.33.1
module=github.com/axllent/mailpit
bindir="${XDG_CACHE_HOME:-$HOME/.cache}/ballet/bin"
bin="$bindir/mailpit-$version"

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$bindir"
echo "building mailpit $version into $bin (about a minute) ..." >&2
# Install into a temporary folder and rename, so that a half-built binary
# is never used; run outside any module so the caller's go.mod does not
# matter.
tmp=$(mktemp -d "$bindir/.mailpit-$version.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cd /
GOWORK=off GOBIN="$tmp" CGO_ENABLED=0 go install "$module@$version" >&2
if [ ! -x "$tmp/mailpit" ]; then
	echo "mailpit.sh: go install $module@$version made no binary" >&2
	exit 1
fi
mv -f "$tmp/mailpit" "$bin"
echo "$bin"
