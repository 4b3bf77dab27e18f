# idemwork — see README.md. Every target works from a clean clone.
GO      ?= go
BIN     := bin/idemwork
# Every go command here (and the go commands the tests run, which inherit the environment)
# builds with -trimpath: without it Go's build cache keys each of this module's packages by its
# directory, so a clean clone at a new path (CI's) compiles everything again in every mode (vet,
# fuzz, race, plain, ha); with it a clone reuses the work of the last one.
export GOFLAGS += -trimpath
# A count of executions, not a duration: with a duration, go1.26's fuzz coordinator can report
# "context deadline exceeded" as a failure when the time runs out mid-execution
# (golang/go#75804, fixed in go1.27). 20,000 runs take 1-8 s per target here, but
# kernel:FuzzDecodeObject 25-70 s: its 20 KB deep-nesting seed takes ~10 ms a run, and the runs
# stall while the fuzzer minimizes that seed's interesting mutants (-fuzzminimizetime, 60 s by
# default; with 100x a run saw no stall).
FUZZTIME ?= 20000x
# Fuzz targets as package:Target, each run FUZZTIME times by `make test` and `make fuzz`.
FUZZ_TARGETS := ./config:FuzzDecode ./idem/idemtype:FuzzValidateKey ./idem/idemtype:FuzzValidateOwner ./idem:FuzzParseEnvelope ./kernel:FuzzCheckJSONObject ./kernel:FuzzDecodeObject ./httpapi:FuzzDecodeBody ./httpapi:FuzzAuthenticate ./idem/idemhttp:FuzzParseKey ./jsonb:FuzzCanonical ./store:FuzzRedactDSN ./internal/termsafe:FuzzCell

.PHONY: run build example test test-go test-norace test-race test-fuzz test-tmux test-tmux-fuzz test-ha lint lint-example fuzz bench soak clean

## run: build, start the embedded cluster, seed demo data (idempotent) and open the TUI
run: build
	./$(BIN) --demo

## build: compile bin/idemwork
build:
	$(GO) build -o $(BIN) .

## example: build examples/shop (a service on the runner library, its own module) into bin/shop
example:
	cd examples/shop && $(GO) build -o ../../bin/shop .

## test: the whole suite against real PostgreSQL (the tests start their own cluster): lint, the
## real binary under tmux, fuzz, every package under the race detector, and the tests the race
## detector changes (allocation counts) once more without it. The whole suite runs once, under
## -race: a second plain run of every package doubled CI's time and checked nothing the race
## run does not.
test: lint test-tmux-fuzz test-race test-norace

## test-go: every package without the race detector (faster while iterating; not part of test)
test-go:
	$(GO) test -count=1 -timeout 15m ./...

# The packages whose tests count allocations or time a proxy, which the race detector's
# instrumentation changes (jsonb skips its allocation checks under -race).
test-norace:
	$(GO) test -count=1 ./jsonb/... ./internal/latencyproxy/...

# Every package under the race detector: the TUI's commands, the CLI and the bench run
# goroutines too.
# internal/latencyproxy's tests time a proxy (latency, not bandwidth): under the race detector's
# instrumentation the copy loop itself is the bottleneck, so they run in test-norace instead.
test-race:
	$(GO) test -count=1 -race -timeout 15m $$($(GO) list ./... | grep -v /internal/latencyproxy)

## test-ha: the failover tests — the files *_ha_test.go, built with the tag ha, each test starting
## a pg_auto_failover formation (monitor and two nodes under pg_autoctl, 30-100 s to come up here)
## or an async standby pair, and failing it over; .ci/run runs it after `make test` (beside the
## race run, CI took 16 min 34 s, after it 17 min 8 s, one run each on two CPUs that both phases
## keep busy: within the noise, so the simpler order stays; with -trimpath and FILE_COPY test
## databases, a clean clone's whole CI took 14 min 27 s, test-ha about 2.5 min of it).
## Only those files' tests run (the rest ran in `make test`), not under -race: what they
## exercise runs in other processes, and the formations' timings are what bound them. It builds
## no bin/idemwork: its tests re-execute their own binary.
HA_FILES := $(shell find . -name '*_ha_test.go' -not -path './examples/*')
HA_PACKAGES := $(sort $(patsubst %/,%,$(dir $(HA_FILES))))
HA_TESTS := $(shell sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' $(HA_FILES) | paste -sd'|')
test-ha:
	$(GO) test -count=1 -p 1 -tags ha -timeout 14m -run '^($(HA_TESTS))$$' $(HA_PACKAGES)

# Each fuzz target for a few seconds' worth of runs: enough to catch a regression in a parser.
test-fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

# The real binary in a real terminal: create, replay, storm, quit (scripts/tui-smoke.sh).
test-tmux: build
	scripts/tui-smoke.sh $(BIN)

# test-tmux and test-fuzz side by side: the smoke spends its minute or two waiting on a terminal
# (keystrokes, initdb, screens to appear), the fuzz targets keep the cores busy. The smoke's
# lines are printed when both are done; either failing fails the target.
test-tmux-fuzz: build
	@echo "scripts/tui-smoke.sh $(BIN) (alongside the fuzz targets; its output follows them)"
	@log=$$(mktemp); scripts/tui-smoke.sh $(BIN) >$$log 2>&1 & smoke=$$!; \
	$(MAKE) --no-print-directory test-fuzz; fuzz=$$?; \
	wait $$smoke; rc=$$?; cat $$log; rm -f $$log; \
	[ $$rc -eq 0 ] || echo "tui-smoke failed (exit $$rc)"; [ $$fuzz -eq 0 ] && [ $$rc -eq 0 ]

## lint: gofmt, go.mod tidy, go vet, staticcheck (both with the ha tests' files), the dependency arrows
## (scripts/depcheck.sh), and examples/shop built and vetted in its own module (so the library's
## public API cannot break it unseen)
lint: lint-example
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet -tags ha ./...
	$(GO) tool staticcheck -tags ha ./...
	GO=$(GO) scripts/depcheck.sh

lint-example:
	cd examples/shop && $(GO) mod tidy -diff && $(GO) build ./... && $(GO) vet ./...

## bench: the runner against hand-written SQL and the physical limit on the embedded cluster, twice:
## over its socket (idemwork bench, 1 and 16 clients, growth to 100k rows) and through a 500 µs
## round-trip proxy (--rtt 500us, no growth); then the Go micro-benchmarks, then the workbench's
## keypress → frame on a seeded big owner (./tui). Not part of `make test`: it measures, it does
## not check. BENCH_ARGS passes flags to both bench runs, e.g. BENCH_ARGS='--data-dir /tmp/pg --json'
## or BENCH_ARGS='--clients 1,4,16'.
BENCH_ARGS ?=
bench: build
	./$(BIN) bench --clients 1,16 $(BENCH_ARGS)
	./$(BIN) bench --clients 1,16 --rows 0 --rtt 500us $(BENCH_ARGS)
	$(GO) test -run '^$$' -bench . -benchmem ./bench/...
	$(GO) test -run '^$$' -bench . -benchtime 300x -timeout 20m ./tui

## soak: 10,000 storm rounds with every fault injected (kill-child, terminate, restart,
## kill-server) on the embedded cluster, then verify --all; exit 0 only with no duplicate and no
## violation. SOAK_ARGS passes flags, e.g. SOAK_ARGS='--data-dir /tmp/soak/pg --seed 7'.
SOAK_ROUNDS ?= 10000
SOAK_ARGS ?=
soak: build
	./$(BIN) $(SOAK_ARGS) soak --rounds $(SOAK_ROUNDS) --json

## fuzz: run every fuzz target longer (about 20-100 s each; FUZZTIME=1000000x make fuzz for more)
fuzz: FUZZTIME=200000x
fuzz: test-fuzz

clean:
	rm -rf bin
