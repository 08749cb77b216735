# The targets CI runs. `make test` is the one command that checks everything:
# formatting, vet, the Go tests with the race detector, the checks of the
# GitHub and Batch fakes against the official API descriptions, the example catalogs,
# the MCP conformance suite against the real binary, and the official MCP
# client packages (2.x for 2026-07-28, the v1 SDK for 2025-11-25) against the
# real binary over HTTP and stdio (`make clients`, clients/run.sh). `make spec-check`
# checks the GitHub and Batch fakes and adapters against the official API
# descriptions (specs/run.sh says how). `make image-test` builds the container
# image offline with podman and runs its binary (deploy/image-test.sh).

GO ?= go

.PHONY: test fmt-check vet unit spec-check validate-configs conformance clients image-test build bench bench-perf docs docs-check

test: fmt-check vet unit spec-check validate-configs conformance clients image-test

fmt-check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

spec-check:
	GO=$(GO) ./specs/run.sh

validate-configs:
	$(GO) run ./cmd/jobbridge validate configs/*.yaml examples/*/catalog.yaml

conformance:
	./conformance/run.sh

clients:
	cd clients && npm ci --no-audit --no-fund --loglevel=error
	./clients/run.sh

# The generated pages of docs/ (docs/commands.md from the commands' -h,
# docs/catalog-reference.md from the catalog types' doc comments): `make docs`
# rewrites them; `make docs-check` (run by `make test` through the Go tests)
# fails when they, the README's catalog example, a relative link or the
# design page's list of dependencies have drifted from the code.
DOCS_TESTS = TestCommandsDoc|TestCatalogReferenceDoc|TestReadmeCatalogExample|TestRepositoryLinks|TestDesignNamesEveryDependency|TestCheckLinks

docs:
	$(GO) test -count=1 ./cmd/jobbridge -run 'TestCommandsDoc|TestCatalogReferenceDoc' -update

docs-check:
	$(GO) test -count=1 ./cmd/jobbridge ./internal/docgen -run '$(DOCS_TESTS)'

# The container image from deploy/Containerfile, built offline from a static
# binary and checked without running a container: its files, its config and
# labels, and its own binary (version, validate). Needs podman.
image-test:
	GO=$(GO) ./deploy/image-test.sh

build:
	$(GO) build -o bin/jobbridge ./cmd/jobbridge

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The performance table of the README (issue 14): real `jobbridge serve`
# processes against their floors (raw SQLite and PostgreSQL, a bare go-sdk
# server) in one run; sizes from JOBBRIDGE_PERF_* (cmd/jobbridge/perf_bench_test.go).
# Not part of `make test`.
bench-perf:
	$(GO) test -run '^$$' -bench BenchmarkPerf -benchtime 1x -timeout 30m ./cmd/jobbridge/
