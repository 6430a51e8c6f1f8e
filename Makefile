# edl: two commands for a newcomer: `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/.tools/bin
export PATH := $(TOOLS):$(PATH)
# go-nvml's cgo prolog warns about deprecated NVML calls; keep build output readable.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: run test bench chaos openapi lint tools setup build

## setup: install what is missing (redis-server, python3-torch, swag, versitygw); idempotent
setup:
	@scripts/setup.sh

## tools: build the Go-proxy tools into .tools/bin
tools:
	@EDL_SETUP_TORCH=0 EDL_SETUP_CHROMIUM=0 scripts/setup.sh

## build: the edl binary into bin/edl
build:
	$(GO) build -o bin/edl ./cmd/edl

## run: everything on this machine (edl dev): API on 127.0.0.1:8080, data in ./.edl
run: setup build
	exec bin/edl dev

## test: all tests with the race detector, against real servers; a summary at the end
## (packages, tests passed/failed, minutes, the slowest); the raw `go test -json`
## stream is kept in .test-results/test.json. Every package runs under -race: the
## slow ones (worker, internal/e2e, api/ui) are those with goroutines of their own,
## where it must look, and it costs little in the others. A package's binary gets
## 30 minutes: a hang panics with every goroutine's stack well before CI's limit.
TESTFLAGS ?=
test: setup
	@mkdir -p .test-results
	@set -o pipefail; $(GO) test -race -json -timeout 30m $(TESTFLAGS) ./... | $(GO) run ./scripts/testsum -json .test-results/test.json

## chaos: edl dev under faults (worker kills, SIGSTOP, Redis restart, planner restarts, a submit burst)
chaos: setup build
	bin/edl bench chaos --json

## bench: every benchmark, each printing JSON figures (also builds SeaweedFS weed, the S3 server of bench checkpoint)
bench: setup build
	@EDL_SETUP_WEED=1 scripts/setup.sh
	bin/edl bench api --json
	bin/edl bench allreduce --procs 2,4 --mib 64 --json
	bin/edl bench elastic --json
	bin/edl bench checkpoint --mib 256 --json
	bin/edl bench e2e --json
	bin/edl bench sweep --json
	bin/edl sim --compare --trace testdata/traces/philly_vc_ee9e8c.csv --gpus 128 --json
	$(GO) test -run '^$$' -bench Decide ./planner/

## openapi: regenerate openapi/ from the handlers' swag annotations
openapi: tools
	$(TOOLS)/swag init -q -g server.go -d ./api,./jobs -o ./openapi --outputTypes json,yaml
	$(GO) run ./openapi/gen openapi

## lint: gofmt and deadcode must print nothing; go vet and go mod tidy -diff must pass
lint: tools
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@out="$$($(TOOLS)/deadcode -test ./...)"; if [ -n "$$out" ]; then echo "unused code (deadcode -test):"; echo "$$out"; exit 1; fi
