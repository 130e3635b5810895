GO ?= go

.PHONY: build install test test-short bench quickstart vet fmt

build:
	$(GO) build -o bin/hemra ./cmd/hemra

install:
	$(GO) install ./cmd/hemra

vet:
	$(GO) vet ./...

# The test command README.md gives and .ci/run runs.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...

# The main job: apply the quickstart example end to end.
quickstart: build
	./scripts/quickstart.sh

bench:
	./scripts/bench.sh
