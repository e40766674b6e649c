# The whole test suite: builds (or reuses) the rqlite server the storage
# tests need and installs (or reuses) the pinned agent CLIs the agent tests
# drive, vets, runs every test on SQLite and rqlite, and a short fuzz.
SHELL := /bin/bash
# Only the targets that start rqlite nodes build it (the first time, ~90 s):
# `make run` and `make vet` never do.
test bench: export BALLET_RQLITED ?= $(shell scripts/rqlited.sh)

# need_agents sets BALLET_CLAUDE and BALLET_OPENCODE in a recipe's shell:
# the caller's values, else the CLIs scripts/agent-clis.sh installs (once,
# pinned, ~20 s); a failed install stops make before any test runs.
# BALLET_SKIP_AGENTS=1 skips the install and the tests that need the CLIs.
need_agents = if [ "$${BALLET_SKIP_AGENTS:-}" != 1 ] && { [ -z "$${BALLET_CLAUDE:-}" ] || [ -z "$${BALLET_OPENCODE:-}" ]; }; then \
		given_claude="$${BALLET_CLAUDE:-}"; given_opencode="$${BALLET_OPENCODE:-}"; \
		clis=$$(scripts/agent-clis.sh) || { echo "make $@: installing the agent CLIs (scripts/agent-clis.sh) failed; BALLET_SKIP_AGENTS=1 make $@ skips the tests that need them" >&2; exit 1; }; \
		eval "$$clis"; \
		export BALLET_CLAUDE="$${given_claude:-$$BALLET_CLAUDE}" BALLET_OPENCODE="$${given_opencode:-$$BALLET_OPENCODE}"; \
	fi

.PHONY: test vet fuzz run bench

# The failure suite's summary lines are printed after the run (go test hides
# the output of packages that pass).
test: vet
	@$(need_agents); \
	sum=$$(mktemp); BALLET_FAILURETEST_SUMMARY=$$sum go test -count=1 -timeout 25m ./...; rc=$$?; cat $$sum; rm -f $$sum; exit $$rc
	$(MAKE) fuzz

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above are not formatted"; exit 1; }
	go vet ./...

# Short runs of every fuzz target (package:Target); a longer run is
# `go test -run='^$$' -fuzz=Target -fuzztime=5m ./path`.
FUZZ_TARGETS := internal/keys:FuzzParseItem internal/config:FuzzParse \
	internal/pipeline:FuzzParse internal/pipeline:FuzzValidate internal/pipeline:FuzzDecodeJSON \
	internal/server:FuzzDecode internal/realtime:FuzzDecodeMessage internal/budget:FuzzParseDollars
FUZZTIME ?= 5s
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		go test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) ./$$pkg; \
	done

run:
	go run ./cmd/ballet up

bench:
	cd bench && go run . 
