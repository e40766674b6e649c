# The whole test suite: builds (or reuses) the rqlite server the storage
# tests need, vets, runs every test on SQLite and rqlite, and a short fuzz.
SHELL := /bin/bash
# Only the targets that start rqlite nodes build it (the first time, ~90 s):
# `make run` and `make vet` never do.
test bench: export BALLET_RQLITED ?= $(shell scripts/rqlited.sh)

.PHONY: test vet fuzz run bench

# The failure suite's summary lines are printed after the run (go test hides
# the output of packages that pass).
test: vet
	@sum=$$(mktemp); BALLET_FAILURETEST_SUMMARY=$$sum go test -count=1 -timeout 25m ./...; rc=$$?; cat $$sum; rm -f $$sum; exit $$rc
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
	go run ./cmd/ballet serve

bench:
	cd bench && go run . 
