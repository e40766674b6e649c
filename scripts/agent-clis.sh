#!/bin/sh
# Installs the agent CLIs the tests drive (package internal/testkit/agenttest) at
# their pinned versions, each into its own folder of a cache outside the
# repository, and prints their paths as shell assignments:
#
#   BALLET_CLAUDE='/…/ballet/agent-clis/claude-code-2.1.332/node_modules/.bin/claude'
#   BALLET_OPENCODE='/…/ballet/agent-clis/opencode-1.18.33/node_modules/.bin/opencode'
#
# A CLI already in the cache is reused as it is; a missing one is installed
# with `npm install --prefix` into a temporary folder, checked (it must run
# and print its pinned version) and only then renamed into place, so a
# half-done install is never used. Needs node and npm (Debian: apt-get
# install npm); about 10 s and 600 MB per CLI, once.
#
# Usage: eval "$(scripts/agent-clis.sh)" && export BALLET_CLAUDE BALLET_OPENCODE
set -eu

cache="${XDG_CACHE_HOME:-$HOME/.cache}/ballet/agent-clis"

if ! command -v npm >/dev/null 2>&1; then
	echo "agent-clis.sh: npm is needed to install the agent CLIs (Debian: apt-get install npm)" >&2
	exit 1
fi
mkdir -p "$cache"

# check EXE VERSION: EXE runs and prints VERSION first.
check() {
	home=$(mktemp -d)
	out=$(cd / && env -i PATH="$PATH" HOME="$home" XDG_CONFIG_HOME="$home" XDG_DATA_HOME="$home" \
		XDG_CACHE_HOME="$home" XDG_STATE_HOME="$home" "$1" --version </dev/null 2>&1) || {
		rm -rf "$home"
		echo "agent-clis.sh: $1 --version failed: $out" >&2
		return 1
	}
	rm -rf "$home"
	case "$out" in
	"$2" | "$2 "*) return 0 ;;
	esac
	echo "agent-clis.sh: $1 --version says \"$out\", want $2" >&2
	return 1
}

# install NAME PACKAGE VERSION BIN: prints the executable's path.
install() {
	dir="$cache/$1-$3"
	exe="$dir/node_modules/.bin/$4"
	if [ -x "$exe" ]; then
		echo "$exe"
		return 0
	fi
	if [ -e "$dir" ]; then
		echo "agent-clis.sh: $dir has no $4: installing it again" >&2
		rm -rf "$dir"
	fi
	echo "agent-clis.sh: installing $2@$3 into $dir (about 10 s) ..." >&2
	tmp=$(mktemp -d "$cache/.$1-$3.XXXXXX")
	if ! npm install --prefix "$tmp" --no-audit --no-fund --no-update-notifier "$2@$3" >&2 ||
		! check "$tmp/node_modules/.bin/$4" "$3"; then
		rm -rf "$tmp"
		echo "agent-clis.sh: installing $2@$3 failed" >&2
		return 1
	fi
	# Another install may have finished first: keep that one.
	if ! mv -T "$tmp" "$dir" 2>/dev/null; then
		rm -rf "$tmp"
		[ -x "$exe" ] || { echo "agent-clis.sh: could not move the install into $dir" >&2; return 1; }
	fi
	echo "$exe"
}

# quote prints its argument as a single-quoted shell word.
quote() {
	printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

claude=$(install claude-code @anthropic-ai/claude-code 2.1.332 claude)
opencode=$(install opencode opencode-ai 1.18.33 opencode)
echo "BALLET_CLAUDE=$(quote "$claude")"
echo "BALLET_OPENCODE=$(quote "$opencode")"
