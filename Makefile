# ray-service. The two set-up commands are `make run` and `make test` (see README.md).
GO      ?= go
BIN     := bin
STATE   ?= .run/stack
PKGS    := ./...

.PHONY: all build run test unit fuzz integration integration-postgres stack stack-down vet swagger swagger-check client bench clean

# swag reads only the service's packages: a walk of the whole tree fails when a file there goes while it
# walks (the client's temporary file, the stack's state), as the checks run beside the integration tests.
SWAG := $(GO) tool swag init -g main.go -d ./cmd/ray-service,./internal --parseInternal --outputTypes json

all: build

# One configuration, static, for the service, the vet, the linter's export data and the integration
# tests' binary: the Go build cache keys a compiled package by CGO_ENABLED and -trimpath too, so each
# configuration compiles the service's dependencies (and the standard library) again. Only the unit
# tests (-race) and the fuzzing (instrumented) need their own. Cold, on 2 cores, make test took 55 m 45 s
# and 104.7 CPU-minutes with it, against 62 m 58 s and 118.7 before (a run each).
STATIC := CGO_ENABLED=0 GOFLAGS='-trimpath $(GOFLAGS)'

# The one build command: the Dockerfile's build stage runs it too.
build: | $(MODULES)
	$(STATIC) $(GO) build -ldflags '-s -w' -o $(BIN)/ray-service ./cmd/ray-service

# golangci-lint is pinned in tools/lint/go.mod (its own module, so that its dependencies stay out of
# the service's); `go tool -n` builds it once into the Go build cache and names the binary.
vet: client
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(STATIC) $(GO) vet $(PKGS)
	$(STATIC) $(GO) vet -tags integration ./test/...
	$(STATIC) $$(cd tools/lint && $(GO) tool -n golangci-lint) run ./...
	@grep -q '^RUN make build$$' Dockerfile || { echo "Dockerfile must build with make build"; exit 1; }

# docs/swagger (Swagger 2.0) and docs/openapi (OpenAPI 3) are generated from the handlers' annotations by
# the swag pinned in go.mod, completed and converted by cmd/openapi-docs, which validates both.
swagger:
	@tmp=$$(mktemp -d) && $(SWAG) -o $$tmp >/dev/null && $(GO) run ./cmd/openapi-docs $$tmp/swagger.json docs; rc=$$?; rm -rf $$tmp; exit $$rc

swagger-check:
	@tmp=$$(mktemp -d) && { $(SWAG) -o $$tmp/swag >/dev/null && $(GO) run ./cmd/openapi-docs $$tmp/swag/swagger.json $$tmp \
		|| { echo "swagger-check: generating the documents failed (above)"; rm -rf $$tmp; exit 1; }; } \
		&& diff -r docs/swagger $$tmp/swagger >/dev/null && diff -r docs/openapi $$tmp/openapi >/dev/null \
		|| { echo "docs/swagger or docs/openapi is out of date: run make swagger"; rm -rf $$tmp; exit 1; }; rm -rf $$tmp

# The OpenAPI client the integration tests drive the service with, generated from docs/openapi by the
# oapi-codegen pinned in tools/oapi: never edited, never committed (its dependency, oapi-codegen/runtime,
# is in go.mod for it).
CLIENT := test/integration/rayclient/client.gen.go
# Written whole, then renamed: the checks and the integration tests may make it at the same time.
client: | $(MODULES)
	@mkdir -p $(dir $(CLIENT))
	cd tools/oapi && $(GO) tool oapi-codegen -generate types,client -package rayclient -o ../../$(CLIENT).$$$$.tmp ../../docs/openapi/openapi.json \
		&& mv ../../$(CLIENT).$$$$.tmp ../../$(CLIENT)

# The local stack's binaries (cold: 26 to 31 minutes on 2 cores; cached afterwards by version).
stack:
	stack/build.sh
	stack/crds.sh

stack-down:
	stack/down.sh $(STATE)

# run: the service on the local stack (started here) unless RAY_SERVICE_KUBECONFIG names a cluster.
run: build
	stack/packages.sh run
	stack/run.sh

# The integration tests, with the checks, the unit tests and the fuzzing beside them at the lowest
# priority: the stack's build waits on downloads and the integration tests mostly wait on the stack (a
# schedule's minutes, Prometheus' scrapes), and the two cores would idle. On a fresh machine the checks'
# downloads and compiles fill those gaps instead of coming first (about 5 of 65 minutes). Each part's
# output is printed as a whole when it ends; a failing check fails the run once the others end.
#
# The service's, the linter's and the client generator's modules (59 s to download on an empty module
# cache) come while the stack builds: what needs them waits for them (MODULES), the stack's build does not.
# The checks wait for the service's build too: they reuse its compiled dependencies (STATIC), where two
# go commands compiling at once would each compile them.
test:
	stack/packages.sh test
	$(MAKE) --no-print-directory -j3 --output-sync=target MODULES=modules integration checks unit-and-fuzz

.PHONY: modules checks unit-and-fuzz bench-checks
modules:
	stack/gomod.sh . tools/lint tools/oapi

checks: | $(MODULES) build
	nice -n 19 $(MAKE) --no-print-directory vet swagger-check

unit-and-fuzz: | $(MODULES)
	nice -n 19 $(MAKE) --no-print-directory unit
	nice -n 19 $(MAKE) --no-print-directory bench-checks
	nice -n 19 $(MAKE) --no-print-directory fuzz

# Vet runs once, in `make vet`, with every analyzer over the same packages and their tests: `go test`
# vets too (a few analyzers, but over every package the tests import, in each build mode). Cold, it
# took a fifth of the unit tests' compile under -race (953 against 742 CPU seconds, 497 against 390 s
# on 2 cores), and again for the fuzzing's instrumented build and the integration tests' binary.
# -timeout: a package's bound only ends a run that hangs. history's tests take 91 s warm under -race
# and 245 s cold; niced beside the suite on a loaded machine they passed Go's default 10 min.
unit:
	$(GO) test -race -vet=off -count=1 -timeout 30m $(PKGS)

# Each Go benchmark once, for its own checks (pages full, counts right, every answer 200): with
# BENCH_CHECKS_ONLY=1 no figure is judged against its target (internal/benchtarget); `make bench`
# judges them. Only the packages that hold benchmarks (found when it runs: the Docker build has no
# .git), in the build's configuration (STATIC).
BENCHPKGS = $(addprefix ./,$(sort $(dir $(shell git grep -l '^func Benchmark' -- '*_test.go'))))
bench-checks: | $(MODULES)
	BENCH_CHECKS_ONLY=1 $(STATIC) $(GO) test -vet=off -count=1 -run '^$$' -bench . -benchtime 1x $(BENCHPKGS)

# Each fuzz target (package:target) for a bounded time; `unit` already ran their seeds. A crasher fails
# the run and is kept under the package's testdata/fuzz as a regression seed. Go's fuzzing can also end
# with "context deadline exceeded" and no failing input, when a busy worker misses the -fuzztime deadline:
# then the corpus is replayed, and only a failure there fails the run.
FUZZTIME    ?= 15s
FUZZTARGETS := internal/api:FuzzQueryParameters internal/api:FuzzRequestBodies \
	internal/ray:FuzzSummarize internal/signing:FuzzTemplateRead
fuzz:
	@for t in $(FUZZTARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; corpus=$$pkg/testdata/fuzz/$$name; \
		before=$$(ls "$$corpus" 2>/dev/null | wc -l); \
		echo "fuzz $$t for $(FUZZTIME)"; \
		if ! $(GO) test -vet=off -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./$$pkg; then \
			if [ "$$(ls "$$corpus" 2>/dev/null | wc -l)" != "$$before" ]; then echo "fuzz $$t: a failing input is in $$corpus"; exit 1; fi; \
			echo "fuzz $$t: stopped without a failing input; replaying its corpus"; \
			$(GO) test -vet=off -count=1 -run "^$$name\$$" ./$$pkg || exit 1; \
		fi; \
	done

# Integration tests run inside a network namespace that has only `lo`: everything they need is built
# and downloaded before entering it. Six parallel tests at a time, not one per core: they mostly wait on
# the stack (a schedule's minutes, Prometheus' scrapes, the operator).
# The compatibility test reads the CRDs of KubeRay v1.5.0 from its module (test/compat/kuberay15).
# A failed run ends with the logs' tails; what failed (test/integration/failures.awk) is repeated after
# them, as CI shows a run's end.
integration: build stack client
	stack/gomod.sh test/compat/kuberay15
	$(STATIC) $(GO) test -c -vet=off -tags integration -o $(BIN)/integration.test ./test/integration
	rm -f $(BIN)/integration.rc
	cd test/integration && { RAY_SERVICE_BIN=$(CURDIR)/$(BIN)/ray-service RAY_TEST_PAIRS=$(CURDIR)/$(BIN)/answered-pairs.txt \
		../../stack/netns.sh ../../$(BIN)/integration.test -test.v -test.count=1 -test.timeout=40m -test.parallel=6; \
		echo $$? > ../../$(BIN)/integration.rc; } 2>&1 | tee ../../$(BIN)/integration.log
	@rc=$$(cat $(BIN)/integration.rc 2>/dev/null || echo lost); if [ "$$rc" != 0 ]; then \
		echo "integration: failed (exit $$rc); what failed, as the run printed it:"; \
		awk -f test/integration/failures.awk $(BIN)/integration.log; \
		exit 1; fi

# The integration tests with every instance's database (history, audit trail, notifications,
# utilization) in a PostgreSQL database of its own in the stack's, as several replicas keep them; the
# tests that name a database keep theirs. `make test` runs them on SQLite, and the contracts of every store
# on both.
integration-postgres:
	RAY_TEST_DATABASE=postgres $(MAKE) --no-print-directory integration

# The micro-benchmarks, then the list benchmark against a local stack of its own (bench/stack.sh:
# 10,000 RayClusters; BENCH_ARGS='-objects 100000' for more). It writes docs/benchmarks.md.
bench: build stack
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...
	bench/stack.sh $(BENCH_ARGS)
	bench/stack.sh -watch 1000

clean:
	rm -rf $(BIN) .run
