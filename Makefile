# The Makefile is the interface: CI runs `make test` (see .ci/run).
GO       ?= go
BIN      ?= bin
DATA     ?= ./archive
FUZZTIME ?= 5m
CORPUS   ?= ../shared/corpus/linux-mips-sample.mbox.gz
# The last commit before compressed records: make bench's "before".
BEFORE   ?= 8bf1473

.PHONY: all build test test-deps check bench demo fuzz fuzz-short clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# The whole suite: static checks, then every test with the race detector.
# Installs the real servers the tests use (Dovecot, Chromium) when missing.
test: test-deps check
	$(GO) test -race -timeout 60m ./...

test-deps:
	@scripts/install-test-deps.sh

check:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi

# Speed and memory figures, each beside its baseline in the same run: the
# importer against a bare bbolt loop and against the importer of
# $(BEFORE), before compression (separate processes: wall time, peak
# RSS, bytes on disk, store bytes per input byte, then the same store
# after resolver compact), then the packages' Go benchmarks, and the
# resolver's raw reads before and after. The corpus benchmarks skip when
# $(CORPUS) is absent. Takes a few minutes.
bench: build
	scripts/before.sh $(BEFORE) $(BIN)/before
	$(GO) run ./internal/tools/importbench --corpus $(CORPUS) --importer $(BIN)/importer --before $(BIN)/before/importer --resolver $(BIN)/resolver
	$(GO) test -run '^$$' -bench . -benchmem ./callnumber/ ./shuffle/
	$(GO) test -run '^$$' -bench . -benchtime 5000x ./authority/ ./coordinator/
	$(GO) test -run '^$$' -bench . -benchtime 3x ./store/boltstore/ ./store/internal/record/ ./ingest/ ./mbox/ ./mailsource/
	@echo "== resolver raw reads before compression ($(BEFORE))"
	cd $(BIN)/before/src && CHIBRARY_CORPUS=$(abspath $(CORPUS)) $(GO) test -run '^$$' -bench 'BenchmarkServe/raw$$' -benchtime 20000x ./resolver/
	@echo "== resolver, compressed records"
	$(GO) test -run '^$$' -bench BenchmarkServe -benchtime 20000x ./resolver/
	$(GO) test -run '^$$' -bench BenchmarkDovecotFirstPass -benchtime 1x ./imapwatch/

# Import the fixtures into $(DATA) and show a URL that resolves.
demo: build
	@scripts/demo.sh $(BIN) $(DATA)

# Every fuzz target for FUZZTIME each (make fuzz FUZZTIME=30s for a short run).
fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

fuzz-short:
	@scripts/fuzz.sh 30s

clean:
	rm -rf $(BIN)
