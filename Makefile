# Switchboard — see README.md.
GO      ?= go
CONFIG  ?= config.yaml
BIN     := bin/gateway
# VERSION is stamped into the binary (gateway version): the git tag or
# commit by default; make build VERSION=v0.1.0 to choose.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
# STRIP drops the symbol table and DWARF (32 MB of 105): stack traces and
# profiles keep their function names (pclntab stays). make build STRIP=
# keeps them, for a debugger (docs/operating.md, "The binary").
STRIP   ?= -s -w
LDFLAGS := $(STRIP) -X main.version=$(VERSION)
IMAGE   ?= switchboard

.PHONY: run build test vet fmt bench soak clean static docker version fuzz

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gateway

## version: the version make would stamp into the binary
version:
	@echo $(VERSION)

## static: the binary the Dockerfile builds (no cgo: modernc.org/sqlite is pure Go), in bin/gateway-static
static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/gateway-static ./cmd/gateway

## docker: the container image, $(IMAGE):$(VERSION) and $(IMAGE):latest (docs/operating.md)
docker:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) -t $(IMAGE):latest .

## run: start the gateway with config.yaml (stdin REPL when a terminal, HTTP on 127.0.0.1:8080)
run: build
	@mkdir -p data
	./$(BIN) --config $(CONFIG)

## test: every test — unit, wire-level integration, browser
test:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "not gofmt'ed (make fmt):"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 10m ./...

## fuzz: every fuzz target for FUZZTIME each (1m); make test runs their seed corpora
FUZZTIME ?= 1m
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

## bench: the benchmark report (docs/benchmarks.md): gateway vs the floors, see bench/
bench: build
	$(GO) build -o bin/bench ./bench
	./bin/bench --gateway $(BIN) --out docs/benchmarks.md

## soak: sessions opened, used and closed for minutes; memory and goroutines must level off (docs/soak.md)
soak: build
	$(GO) build -o bin/bench ./bench
	./bin/bench --gateway $(BIN) --soak $${SOAK:-3m} --out docs/soak.md

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
