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
## On a fresh machine most of the time is the cold compile, so everything is compiled
## once, under -race: the edl binary that api/ui and internal/e2e run as `edl dev` is
## built with -race too (races in those processes are reported as well), here, before
## the test binaries, into .test-results/edl, which they run ($$EDL_TEST_EDL, see
## testenv.EdlBinary): built in each package's tests instead, on an empty build cache
## both compiled all of it at once beside the test binaries' compiles. A plain bin/edl
## as well compiled the product twice (2.3 minutes more on a fresh 2-core machine).
## -vet=off: `make lint` runs the whole of go vet over every package (CI runs both);
## go test's own subset of it cost another minute of a fresh run.
## The order of the packages is chosen: go test compiles and runs the test binaries in the
## order of its arguments, two at a time on two cores. The two packages of several torch
## programs at once, internal/e2e and worker/live, must not run side by side: together
## they overloaded two cores (a live job's group setups timed out in a fresh run).
## internal/e2e goes first, worker/builtin and worker/restart beside it, then
## worker/live, and the short packages fill the other core beside worker/live. With
## internal/e2e last instead, it ran alone at the end: a fresh run's tests took 1.7
## minutes longer.
## TESTBUILD: test binaries and the edl they run carry no DWARF (compile and link
## both ~25 % faster: a cold race build of cmd/edl took 117 s instead of 159 s here).
## Race reports and panics still name file:line (from the Go symbol table); only a
## debugger such as dlv wants the DWARF back: make test TESTBUILD=.
TESTBUILD ?= -gcflags=all=-dwarf=false -ldflags=-w
TESTFLAGS ?=
TESTPKGS ?= ./internal/e2e ./worker/builtin ./worker/restart ./worker/live $(shell $(GO) list ./...)
test: setup
	@mkdir -p .test-results
	$(GO) build -race $(TESTBUILD) -o .test-results/edl ./cmd/edl
	@set -o pipefail; EDL_TEST_EDL=$(CURDIR)/.test-results/edl $(GO) test -race -vet=off $(TESTBUILD) -json -timeout 30m $(TESTFLAGS) $(TESTPKGS) | \
	  $(GO) run ./scripts/testsum -json .test-results/test.json

## chaos: edl dev under faults (worker kills, SIGSTOP, Redis restart, planner restarts, a submit burst)
chaos: setup build
	bin/edl bench chaos --json

## bench: every benchmark, each printing JSON figures (also builds SeaweedFS weed, the S3 server of bench checkpoint).
## bin/edl is built with the rigs tag here: the fake Nomad (bench e2e --nomad) and the SeaweedFS harness
## (bench checkpoint's s3 figures) are in no other build, so the product binary never carries them.
bench: setup
	$(GO) build -tags rigs -o bin/edl ./cmd/edl
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
	$(GO) vet -tags rigs ./internal/bench/... ./checkpoint/cpbench/... ./cmd/edl/...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@# code is dead only when neither build reaches it: the rigs harnesses (checkpoint/weed, ...) are reached
	@# from the rigs build alone, the no-rigs stand-ins from the plain build alone
	@plain="$$($(TOOLS)/deadcode -test ./...)" && rigs="$$($(TOOLS)/deadcode -test -tags rigs ./...)" || exit 1; \
	out="$$(printf '%s\n' "$$plain" | grep -Fx -e "$$rigs")"; \
	if [ -n "$$out" ]; then echo "unused code (deadcode -test, with and without -tags rigs):"; echo "$$out"; exit 1; fi
