# specsync — the commands the README documents.
GO ?= go
# Tests run with the emulators started (or reused) by withemulators.
WITH_EMULATORS = $(GO) run ./emulator/cmd/withemulators --
TEST_FLAGS ?= -count=1 -timeout 15m

.PHONY: test demo run bench fuzz vet fmt

## test: every test, with the Firestore and Pub/Sub emulators running.
test: vet
	$(WITH_EMULATORS) $(GO) test $(TEST_FLAGS) ./...

## demo: emulators + local OCI registry, reconcile the examples twice, print the catalog.
demo:
	$(GO) run ./cmd/specsync demo

## bench: benchmarks (figures go into docs/benchmarks.md).
bench:
	$(WITH_EMULATORS) $(GO) test -run '^$$' -bench . -benchmem ./...

## fuzz: fuzz the spec parser for a minute.
fuzz:
	$(GO) test ./pkg/spec -run '^$$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 2s

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

fmt:
	gofmt -w .

## run: the local stack (every function, emulators, OCI registry, push subscription) on $PORT.
run:
	$(GO) run ./cmd/specsync run
