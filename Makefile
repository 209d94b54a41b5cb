# Switchboard — see README.md.
GO      ?= go
CONFIG  ?= config.yaml
BIN     := bin/gateway

.PHONY: run build test vet fmt bench soak clean

build:
	$(GO) build -o $(BIN) ./cmd/gateway

## run: start the gateway with config.yaml (stdin REPL when a terminal, HTTP on 127.0.0.1:8080)
run: build
	@mkdir -p data
	./$(BIN) --config $(CONFIG)

## test: every test — unit, wire-level integration, browser
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 10m ./...

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
