# specsync — the commands README.md and docs/testing.md document.
GO ?= go
# Tests run with the emulators started (or reused) by withemulators.
WITH_EMULATORS = $(GO) run ./emulator/cmd/withemulators --
TEST_FLAGS ?= -count=1 -timeout 15m
# Installs what a target needs besides Go when it is missing (one line when
# nothing is); `make test SETUP=:` skips it.
SETUP = scripts/setup

.PHONY: test demo setup deploy-check run bench fuzz fuzz-http reliability mutants vet fmt

## test: every test, with the Firestore and Pub/Sub emulators running.
test: setup vet
	$(WITH_EMULATORS) $(GO) test $(TEST_FLAGS) ./...

## demo: emulators + local OCI registry, reconcile the examples twice, print the catalog.
demo:
	$(SETUP) demo
	$(GO) run ./cmd/specsync-local demo

## setup: install what make test (and so make demo) needs: scripts/setup test.
setup:
	$(SETUP) test

## deploy-check: terraform/ planned by the real terraform and the real
## hashicorp/google and archive providers (an offline mirror of the
## provider archives SPECSYNC_TF_PROVIDERS names, by default those of the
## workplace's shared folder beside the checkout), for the root modules
## teams write (examples/deploy as shipped, a registries file outside the
## tree, views, domain-restricted mode, refused inputs); each plan read as
## JSON and held against the code (terraform/*_test.go, -tags deploycheck).
## The Pub/Sub emulator stands in for the topics a plan reads.
deploy-check:
	@tf="$$($(SETUP) terraform)" && \
	  $(WITH_EMULATORS) env SPECSYNC_TERRAFORM="$$tf" $(GO) test -tags deploycheck $(TEST_FLAGS) ./terraform/

## bench: benchmarks (figures go into docs/BENCHMARKS.md).
bench:
	$(WITH_EMULATORS) $(GO) test -run '^$$' -bench . -benchmem ./...

## reliability: the tests the rows of scripts/reliability name (the fault
## matrix, races, crashes, fuzz seed corpora), then (alone, so they measure
## the code and not the rest of the suite) the loopback load tests, the
## tests of files of build tag reliability; scripts/reliability reads the
## test files for which tests and packages each run takes.
## docs/RELIABILITY.md is written from the results, and a row whose pattern
## matches no test fails the target.
RELIABILITY_OUT ?= docs/RELIABILITY.md
RELIABILITY = $(GO) run ./scripts/reliability
reliability:
	$(WITH_EMULATORS) sh -c 'rc=0; \
	  run="$$($(RELIABILITY) -run-pattern)" && pkgs="$$($(RELIABILITY) -packages)" || exit 1; \
	  loadrun="$$($(RELIABILITY) -load -run-pattern)" && loadpkgs="$$($(RELIABILITY) -load -packages)" || exit 1; \
	  $(GO) test -json -count=1 -timeout 15m -run "$$run" $$pkgs > .reliability.json || rc=1; \
	  $(GO) test -json -count=1 -timeout 5m -p 1 -tags reliability -run "$$loadrun" $$loadpkgs >> .reliability.json || rc=1; \
	  $(RELIABILITY) -o $(RELIABILITY_OUT) .reliability.json || rc=1; exit $$rc'

## fuzz-http: fuzz the HTTP input parsing, 30 s per target: the whole
## broker, then each route family (instances, bindings, the change feed,
## admin) and bootstrap on the emulators; their seed corpora
## (testdata/fuzz) run in every go test.
fuzz-http:
	$(GO) test ./pkg/osb -run '^$$' -fuzz FuzzDecodeBody -fuzztime 30s
	$(WITH_EMULATORS) $(GO) test ./pkg/osb -run '^$$' -fuzz FuzzBrokerRequest -fuzztime 30s -parallel 2
	$(WITH_EMULATORS) $(GO) test ./pkg/bootstrap -run '^$$' -fuzz FuzzBootstrapParams -fuzztime 30s -parallel 2
	$(WITH_EMULATORS) $(GO) test ./pkg/osb -run '^$$' -fuzz '^FuzzInstances$$' -fuzztime 30s -parallel 2
	$(WITH_EMULATORS) $(GO) test ./pkg/osb -run '^$$' -fuzz '^FuzzBindings$$' -fuzztime 30s -parallel 2
	$(WITH_EMULATORS) $(GO) test ./pkg/osb -run '^$$' -fuzz '^FuzzChangeFeed$$' -fuzztime 30s -parallel 2
	$(WITH_EMULATORS) $(GO) test ./pkg/osb -run '^$$' -fuzz '^FuzzAdmin$$' -fuzztime 30s -parallel 2

## mutants: plant one small bug per promise (README, design.md's
## guarantees, the HTTP input contract) in a copy of the repository, one at
## a time, run the tests that should catch each, and write
## docs/MUTANTS.md; a survivor is a promise no test guards. Not run by CI.
mutants:
	$(WITH_EMULATORS) $(GO) run ./scripts/mutants -o docs/MUTANTS.md

## fuzz: fuzz the spec parser for a minute.
fuzz:
	$(GO) test ./pkg/spec -run '^$$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 2s

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

fmt:
	gofmt -w .

## run: the local stack (every function, emulators, OCI registry, push subscription) on $PORT.
## Built, then run (not go run, which exits 1 when interrupted, so Ctrl-C
## would end in "make: *** Error 1"): the binary stops cleanly on Ctrl-C
## and exits 0.
run:
	$(GO) build -o specsync-local ./cmd/specsync-local
	./specsync-local run
