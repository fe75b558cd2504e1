# filesink: build, test, benchmark.
GO ?= go

.PHONY: all build test lint chaos fuzz bench example example-wordcount

all: build test

build:
	$(GO) build -o bin/filesink ./cmd/filesink

# The one command that runs every test: format and vet checks, then all
# tests (unit, fuzz seed corpora, crash loops, named crash points, kill -9
# chaos, S3 against a real MinIO) under the race detector. scripts/minio
# installs the pinned MinIO into the cache on first use and prints its path;
# the S3 tests start their own throwaway servers from it.
test: lint
	FILESINK_MINIO="$$(GO='$(GO)' scripts/minio)" && export FILESINK_MINIO && \
	$(GO) test -race -timeout 40m ./...

# The kill -9 chaos tests of the CLI alone, the group-mode one with
# CHAOS_EVENTS random events (kill -9, pause, scale up and down) instead
# of the 50 of `make test`.
CHAOS_EVENTS ?= 1000
chaos:
	FILESINK_MINIO="$$(GO='$(GO)' scripts/minio)" && export FILESINK_MINIO && \
	FILESINK_GROUP_CHAOS_EVENTS=$(CHAOS_EVENTS) $(GO) test -race -timeout 60m -run '^TestChaos' -v ./cmd/filesink

# gofmt, vet, and the build and vet for darwin and windows (the tests run
# on Linux; the library and the CLI must build everywhere).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	for os in darwin windows; do GOOS=$$os $(GO) build ./... && GOOS=$$os $(GO) vet ./... || exit 1; done

# Short coverage-guided fuzzing of the decoders and the path sanitiser.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 30s ./recovery
	$(GO) test -run '^$$' -fuzz '^FuzzSanitize$$' -fuzztime 30s ./bucketing
	$(GO) test -run '^$$' -fuzz '^FuzzValid$$' -fuzztime 30s ./internal/jsonscan

bench:
	scripts/bench

# The main job on the embedded default: a generator into ./out, run from
# the built binary (kill -9 of `go run` would leave the compiled child
# writing: see the README's quick start).
example: build
	bin/filesink run --source 'gen://?count=1000000' --sink ./out

# The word-count example (examples/wordcount) over a bounded topic of text
# lines, into table wc; see its README for a local broker.
WC_BROKERS ?= 127.0.0.1:9092
WC_TOPIC ?= lines
WC_DSN ?= root@tcp(127.0.0.1:3306)/test
WC_STATE ?= ./wc-state
example-wordcount:
	$(GO) run ./examples/wordcount --brokers '$(WC_BROKERS)' --topic '$(WC_TOPIC)' --dsn '$(WC_DSN)' --state '$(WC_STATE)' --bounded
