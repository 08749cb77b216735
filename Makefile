# The targets CI runs. `make test` is the one command that checks everything:
# formatting, vet, the Go tests with the race detector, the checks of the
# GitHub and Batch fakes against the official API descriptions, the example catalogs,
# and the MCP conformance suite against the real binary. `make spec-check`
# checks the GitHub and Batch fakes and adapters against the official API
# descriptions (specs/run.sh says how).

GO ?= go

.PHONY: test fmt-check vet unit spec-check validate-configs conformance build bench

test: fmt-check vet unit spec-check validate-configs conformance

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

build:
	$(GO) build -o bin/jobbridge ./cmd/jobbridge

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
