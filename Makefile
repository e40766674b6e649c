# The whole test suite: vets while it builds (or reuses) the rqlite server
# the storage tests need, installs (or reuses) the pinned agent CLIs the
# agent tests drive and builds (or reuses) the pinned Gitea the forge tests
# run, side by side; runs every test on SQLite and rqlite, and a short fuzz.
# A part that cannot be built or installed fails the run; the tests that
# need it are skipped when asked: BALLET_SKIP_RQLITE=1, BALLET_SKIP_AGENTS=1,
# BALLET_SKIP_GITEA=1, BALLET_SKIP_MAILPIT=1 and BALLET_SKIP_BROWSER=1 make test.
# Mailpit (scripts/mailpit.sh, ~1 min once) is the real SMTP server the mail
# tests send to. Every skip is
# counted in the summary line printed at the end (docs/testing.md).
SHELL := /bin/bash

.PHONY: test vet fuzz run bench mutation mutation-guards webui webui-check webui-size

# need_rqlited sets BALLET_RQLITED in a recipe's shell: the caller's value,
# else the binary scripts/rqlited.sh builds (once); a failed build stops make
# before anything runs. `make run` does not need it.
need_rqlited = if [ -z "$${BALLET_RQLITED:-}" ]; then \
		BALLET_RQLITED=$$(scripts/rqlited.sh) || { echo "make $@: building rqlited (scripts/rqlited.sh) failed; BALLET_SKIP_RQLITE=1 make test skips the tests that need it" >&2; exit 1; }; \
		export BALLET_RQLITED; \
	fi

# need_chromium checks for the browser the UI tests drive (internal/testkit/uitest):
# $BALLET_CHROMIUM, else Debian's /usr/bin/chromium, which .ci/run installs;
# a missing one stops make before any test runs. The tests also run axe-core
# from web/node_modules, installed here from web/package-lock.json when a fresh
# clone has none. BALLET_SKIP_BROWSER=1 skips the check and the tests that need it.
need_chromium = if [ "$${BALLET_SKIP_BROWSER:-}" != 1 ]; then \
		chromium="$${BALLET_CHROMIUM:-/usr/bin/chromium}"; \
		command -v "$$chromium" >/dev/null || { echo "make $@: no Chromium at $$chromium (apt-get install chromium, as .ci/run does, or set BALLET_CHROMIUM); BALLET_SKIP_BROWSER=1 make $@ skips the tests that need it" >&2; exit 1; }; \
		if [ ! -f web/node_modules/axe-core/axe.min.js ]; then \
			(cd web && npm ci --no-audit --no-fund --loglevel=error) || { echo "make $@: npm ci in web/ failed (the browser tests need axe-core); BALLET_SKIP_BROWSER=1 make $@ skips them" >&2; exit 1; }; \
		fi; \
	fi

# The parts make test builds or installs run side by side, in the
# background, while the rest is prepared (vet, at nice 19, compiles Ballet
# meanwhile and goes on beside the tests; its output and verdict come after
# theirs, and a failed vet fails make test):
# Gitea's cold build (~6 min, mostly downloading and compiling its modules),
# rqlited's (~90 s), Mailpit's (~1 min) and the agent CLIs' npm install (~20 s). parts_start
# starts each one the caller neither gave (BALLET_GITEA, BALLET_RQLITED, BALLET_MAILPIT,
# BALLET_CLAUDE and BALLET_OPENCODE) nor asked to skip (BALLET_SKIP_…=1);
# parts_wait waits for all of them, sets the variables from their output,
# and stops make before any test runs when one failed, naming it and how to
# skip it (every failure is reported, not only the first).
parts_start = parts_out=$$(mktemp -d); gitea_pid=; rqlited_pid=; agents_pid=; mailpit_pid=; \
	given_claude="$${BALLET_CLAUDE:-}"; given_opencode="$${BALLET_OPENCODE:-}"; \
	if [ "$${BALLET_SKIP_GITEA:-}" != 1 ] && [ -z "$${BALLET_GITEA:-}" ]; then scripts/gitea.sh >"$$parts_out/gitea" & gitea_pid=$$!; fi; \
	if [ "$${BALLET_SKIP_RQLITE:-}" != 1 ] && [ -z "$${BALLET_RQLITED:-}" ]; then scripts/rqlited.sh >"$$parts_out/rqlited" & rqlited_pid=$$!; fi; \
	if [ "$${BALLET_SKIP_MAILPIT:-}" != 1 ] && [ -z "$${BALLET_MAILPIT:-}" ]; then scripts/mailpit.sh >"$$parts_out/mailpit" & mailpit_pid=$$!; fi; \
	if [ "$${BALLET_SKIP_AGENTS:-}" != 1 ] && { [ -z "$$given_claude" ] || [ -z "$$given_opencode" ]; }; then scripts/agent-clis.sh >"$$parts_out/agents" & agents_pid=$$!; fi
parts_wait = parts_failed=; \
	if [ -n "$$rqlited_pid" ]; then \
		if wait $$rqlited_pid; then BALLET_RQLITED=$$(cat "$$parts_out/rqlited"); export BALLET_RQLITED; \
		else echo "make $@: building rqlited (scripts/rqlited.sh) failed; BALLET_SKIP_RQLITE=1 make test skips the tests that need it" >&2; parts_failed=1; fi; \
	fi; \
	if [ -n "$$mailpit_pid" ]; then \
		if wait $$mailpit_pid; then BALLET_MAILPIT=$$(cat "$$parts_out/mailpit"); export BALLET_MAILPIT; \
		else echo "make $@: building Mailpit (scripts/mailpit.sh) failed; BALLET_SKIP_MAILPIT=1 make $@ skips the tests that need it" >&2; parts_failed=1; fi; \
	fi; \
	if [ -n "$$agents_pid" ]; then \
		if wait $$agents_pid; then eval "$$(cat "$$parts_out/agents")"; \
			export BALLET_CLAUDE="$${given_claude:-$$BALLET_CLAUDE}" BALLET_OPENCODE="$${given_opencode:-$$BALLET_OPENCODE}"; \
		else echo "make $@: installing the agent CLIs (scripts/agent-clis.sh) failed; BALLET_SKIP_AGENTS=1 make $@ skips the tests that need them" >&2; parts_failed=1; fi; \
	fi; \
	if [ -n "$$gitea_pid" ]; then \
		if wait $$gitea_pid; then BALLET_GITEA=$$(cat "$$parts_out/gitea"); export BALLET_GITEA; \
		else echo "make $@: building Gitea (scripts/gitea.sh) failed; BALLET_SKIP_GITEA=1 make $@ skips the tests that need it" >&2; parts_failed=1; fi; \
	fi; \
	rm -rf "$$parts_out"; [ -z "$$parts_failed" ] || exit 1

# The failure suite's summary lines are printed after the run (go test hides
# the output of packages that pass), then the skips' (internal/testkit/parts:
# a part missing outside CI, or a BALLET_SKIP_… ask): "skipped for missing
# parts: gitea=N …" or "none".
skip_summary = count() { awk -F'\t' -v k="$$1" '$$1 == k { print $$2 }' "$$skips" | sort | uniq -c | awk '{ printf "%s%s=%s", s, $$2, $$1; s = " " }'; }; \
	missing=$$(count missing); asked=$$(count asked); \
	echo "skipped for missing parts: $${missing:-none}"; \
	if [ -n "$$asked" ]; then echo "skipped on request: $$asked"; fi

# go test starts the packages in the order it is given them (./... adds the
# rest, alphabetically), at most two at a time on two cores: the ones that
# take minutes go first, so that the short ones fill the other slot while
# they run instead of the whole run waiting on them at its end. Their
# output is printed in this order too.
TEST_FIRST := ./internal/testkit/failuretest ./internal/testkit/apitest ./internal/forge/gitea \
	./internal/testkit/uitest ./cmd/ballet ./internal/runner ./internal/lint ./internal/testkit/giteatest

test:
	@$(parts_start); \
	$(need_chromium); \
	vetlog=$$(mktemp); nice -n 19 $(MAKE) --no-print-directory vet >$$vetlog 2>&1 & vet_pid=$$!; \
	$(parts_wait); \
	sum=$$(mktemp); skips=$$(mktemp); fuzzlog=$$(mktemp); \
	nice -n 19 $(MAKE) --no-print-directory fuzz >$$fuzzlog 2>&1 & fuzz_pid=$$!; \
	BALLET_FAILURETEST_SUMMARY=$$sum BALLET_SKIP_SUMMARY=$$skips go test -count=1 -timeout 25m $(TEST_FIRST) ./...; rc=$$?; \
	cat $$sum; $(skip_summary); \
	wait $$vet_pid; vet_rc=$$?; cat $$vetlog; \
	if [ $$vet_rc -ne 0 ]; then echo "make test: make vet failed (above)" >&2; rc=1; fi; \
	wait $$fuzz_pid; fuzz_rc=$$?; grep -v '^fuzz: elapsed: ' $$fuzzlog; \
	if [ $$fuzz_rc -ne 0 ]; then echo "make test: make fuzz failed (above)" >&2; rc=1; fi; \
	rm -f $$sum $$skips $$fuzzlog $$vetlog; exit $$rc

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above are not formatted"; exit 1; }
	go vet ./...

# Short runs of every fuzz target (package:Target); make test runs them
# beside the tests, at the lowest priority (nice 19): they use the CPU the
# tests leave idle while they wait, and print their output after the
# tests' (its progress lines left out). A longer run is
# `go test -run='^$$' -fuzz=Target -fuzztime=5m ./path`.
FUZZ_TARGETS := internal/keys:FuzzParseItem internal/config:FuzzParse \
	internal/pipeline:FuzzParse internal/pipeline:FuzzValidate internal/pipeline:FuzzDecodeJSON \
	internal/door:FuzzDecode internal/server:FuzzParseOffset internal/realtime:FuzzDecodeMessage internal/budget:FuzzParseDollars \
	internal/forge:FuzzParseHook internal/knowledge/service:FuzzDecodeBodies internal/webhook:FuzzCheckURL \
	internal/transcript:FuzzParse internal/runner/agent:FuzzLimitReset internal/runner/agent:FuzzLimitLines
# A count of inputs, not a duration: Go 1.26's fuzz coordinator can report
# "context deadline exceeded" when a duration ends while a worker is mid-input
# on a loaded machine (golang/go#75804, fixed in Go 1.27) — a failure with no
# failing input. 20000 inputs take 0.5–13 s per target here.
FUZZTIME ?= 20000x
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		go test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) ./$$pkg; \
	done

run:
	go run ./cmd/ballet up

# The web UI (web/, docs/ui.md): `make webui` rebuilds the committed assets in
# internal/webui/dist from the locked dependencies; `make webui-check` (run by
# .ci/run) also fails when they differ from what is committed, and measures
# the first page; `make webui-size` prints the gzipped JS of the first pages
# (budget: 250 KB).
webui:
	@node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' || \
		{ echo "make webui: Vite needs node >= 20.19 (web/package.json engines); this is node $$(node -v)" >&2; exit 1; }
	cd web && npm ci --no-audit --no-fund && npm test && npm run build

webui-check: webui
	@test -z "$$(git status --porcelain internal/webui/dist)" || { git status --porcelain internal/webui/dist; \
		echo "make webui-check: internal/webui/dist differs from a fresh build of web/: run make webui and commit it" >&2; exit 1; }
	@$(MAKE) --no-print-directory webui-size

webui-size:
	cd web && node scripts/size.mjs 250

# A mutation run over the core packages, each against its own tests
# (tools/mutate, docs/testing.md): about an hour; in neither make test nor CI.
# MUTATION_FLAGS adds flags, e.g. -workers 2 or -match internal/flow/steps.go.
MUTATION_PKGS := ./internal/transition ./internal/job ./internal/access ./internal/flow \
	./internal/store ./internal/store/sqlite ./internal/store/rqlite
mutation:
	@$(need_rqlited); go run ./tools/mutate -out mutation-report.txt $(MUTATION_FLAGS) $(MUTATION_PKGS)

# The packages that guard money, merges and tenants (issue 24's list,
# docs/testing.md has their scores): several hours on 2 cores; the same
# flags. Neither make test nor CI runs it.
MUTATION_GUARD_PKGS := ./internal/forge ./internal/forge/github ./internal/forge/gitea ./internal/forge/gitforge \
	./internal/knowledge ./internal/knowledge/service ./internal/knowledge/client ./internal/budget \
	./internal/runner/protocol ./internal/runner/agent ./internal/runner/proc ./internal/runner/sandbox ./internal/runner/workspace \
	./internal/needsme ./internal/tenancy ./internal/auth
mutation-guards:
	@$(need_rqlited); go run ./tools/mutate -out mutation-guards-report.txt $(MUTATION_FLAGS) $(MUTATION_GUARD_PKGS)

bench:
	@$(need_rqlited); cd bench && go run .
