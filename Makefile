# The Makefile is the interface: CI runs `make test` (see .ci/run).
GO       ?= go
BIN      ?= bin
DATA     ?= ./archive
FUZZTIME ?= 5m
CORPUS   ?= ../shared/corpus/linux-mips-sample.mbox.gz
# staticcheck, at a pinned version (fetched by the Go toolchain once).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The last commit before compressed records: make bench's "before".
BEFORE   ?= 305d721

.PHONY: all build test test-deps check bench bench-scale demo fuzz fuzz-short torture hostile clean

all: build

# --version says which source a binary was built from: the toolchain
# stamps the VCS revision in a git clone (-buildvcs=auto wins over a GOFLAGS
# that turns it off), and the linker stamps it from git where the toolchain
# cannot (a git worktree, whose .git is a file). Without git: "unknown
# revision".
VERSION_PKG := github.com/chibrary/chibrary/internal/version
GIT_REV     := $(shell git rev-parse HEAD 2>/dev/null)
GIT_TIME    := $(shell git log -1 --format=%cI 2>/dev/null)
GIT_MOD     := $(shell test -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" && echo true)
LDFLAGS     := -X $(VERSION_PKG).revision=$(GIT_REV) -X $(VERSION_PKG).revisionTime=$(GIT_TIME) -X $(VERSION_PKG).modified=$(GIT_MOD)

build:
	$(GO) build -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# The whole suite (scripts/test.sh): the real servers and clients the
# tests use (Dovecot, Chromium, ...) installed when missing, static
# checks, then every test with the race detector, each stage said and
# timed; the output is go test's, then the tests that were skipped and
# why (internal/tools/testsummary). It fails exactly when a stage fails.
test:
	@GO=$(GO) scripts/test.sh

test-deps:
	@scripts/install-test-deps.sh

check:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	@# The programs build for a system that is not unix too (the tests
	@# and their kits are unix-only: they start Dovecot, Riak, signals).
	GOOS=windows $(GO) build -o /dev/null ./cmd/...

# Speed and memory figures, each beside its baseline in the same run: the
# importer against a bare bbolt loop and against the importer of
# $(BEFORE), before compression (separate processes: wall time, peak
# RSS, bytes on disk, store bytes per input byte, then the same store
# after resolver compact), on the sample and at the whole list's size,
# the importer into a Riak node (started from the
# Riak test kit, ../shared/riak; msg/s and requests per message beside
# bbolt's), then the packages' Go benchmarks, the resolver's raw reads
# before and after, its message pages beside public-inbox's (when
# installed), and the cost of hostile mail and requests beside ordinary
# ones. The corpus benchmarks skip when $(CORPUS) is absent.
# Takes a few minutes.
bench: build
	scripts/before.sh $(BEFORE) $(BIN)/before
	$(GO) run ./internal/tools/importbench --corpus $(CORPUS) --importer $(BIN)/importer --before $(BIN)/before/importer --resolver $(BIN)/resolver
	@# A public-inbox v2 inbox of the sample beside the mbox file (skips without public-inbox).
	$(GO) run ./internal/tools/piimportbench --corpus $(CORPUS) --importer $(BIN)/importer
	@echo "== the importer against the bare loop at the size of the whole list (the sample 16 times over)"
	$(GO) run ./internal/tools/importbench --corpus $(CORPUS) --importer $(BIN)/importer --copies 16 --rounds 3 --riak off
	$(GO) test -run '^$$' -bench . -benchmem ./callnumber/ ./shuffle/
	$(GO) test -run '^$$' -bench . -benchtime 5000x ./authority/ ./coordinator/
	@# 3 allocators racing on a cluster of 3 Riak nodes from the kit (skips without it).
	$(GO) test -run '^$$' -bench RacingAllocators -benchtime 2000x ./authority/riakauthority/
	$(GO) test -run '^$$' -bench . -benchtime 3x ./store/boltstore/ ./store/internal/record/ ./ingest/ ./mbox/ ./mailsource/
	@echo "== resolver raw reads before compression ($(BEFORE))"
	cd $(BIN)/before/src && CHIBRARY_CORPUS=$(abspath $(CORPUS)) $(GO) test -run '^$$' -bench 'BenchmarkServe/raw$$' -benchtime 20000x ./resolver/
	@echo "== resolver, compressed records"
	$(GO) test -run '^$$' -bench BenchmarkServe -benchtime 20000x ./resolver/
	$(GO) test -run '^$$' -bench BenchmarkPages -benchtime 10000x ./resolver/
	$(GO) test -run '^$$' -bench BenchmarkMessagePage -benchtime 2000x ./resolver/
	@# The same pages beside public-inbox's (skips without it: apt-get install public-inbox).
	$(GO) run ./internal/tools/pibench --corpus $(CORPUS) --bin $(BIN)
	$(GO) test -run '^$$' -bench BenchmarkMonthMbox -benchtime 3x ./resolver/
	$(GO) test -run '^$$' -bench BenchmarkSearch -benchtime 2000x ./resolver/
	@# Ordinary searches on a catalog just opened, beside a page load: p99, 503 and 400 shares.
	$(GO) test -run '^$$' -bench BenchmarkColdSearchBesidePages -benchtime 160x ./resolver/
	@echo "== hostile mail and requests, each beside an ordinary one (docs/reliability.md, Hostile input)"
	$(GO) test -run '^$$' -bench 'BenchmarkHostile$$' -benchtime 10x ./resolver/
	$(GO) test -run '^$$' -bench BenchmarkHostileSearch -benchtime 2000x ./resolver/
	$(GO) test -run '^$$' -bench BenchmarkPagesBesidePartialFetches -benchtime 2000x ./resolver/
	$(GO) test -run '^$$' -bench BenchmarkSlowReaders -benchtime 1x ./resolver/
	$(GO) test -run '^$$' -bench BenchmarkStalledMboxReaders -benchtime 1x ./resolver/
	$(GO) test -run '^$$' -bench BenchmarkHostileThreads -benchtime 3x ./catalog/
	$(GO) test -run '^$$' -bench BenchmarkRebuild -benchtime 3x ./catalog/
	$(GO) test -run '^$$' -bench BenchmarkSearch -benchtime 800x ./catalog/
	$(GO) test -run '^$$' -bench BenchmarkCorpusSearchCounts -benchtime 20x ./catalog/
	CHIBRARY_BENCH_SCALED=1 $(GO) test -run '^$$' -bench BenchmarkScaled -benchtime 1x -timeout 30m ./catalog/
	@# One archive the size of the whole list for all three, built once.
	scaled=$$(mktemp -d) && \
	CHIBRARY_BENCH_SCALED=1 CHIBRARY_BENCH_SCALED_DIR=$$scaled $(GO) test -run '^$$' -bench BenchmarkSearchScaled -benchtime 400x -timeout 30m ./resolver/ && \
	CHIBRARY_BENCH_SCALED=1 CHIBRARY_BENCH_SCALED_DIR=$$scaled $(GO) test -run '^$$' -bench BenchmarkPagesScaled -benchtime 10000x -timeout 30m ./resolver/ && \
	CHIBRARY_BENCH_SCALED=1 CHIBRARY_BENCH_SCALED_DIR=$$scaled $(GO) test -run '^$$' -bench BenchmarkFullSyncScaled -benchtime 1x -timeout 30m ./imapserve/; \
	status=$$?; rm -rf $$scaled; exit $$status
	$(GO) test -run '^$$' -bench 'BenchmarkFetchHeaders1000|BenchmarkIdleLatency' -benchtime 10x ./imapserve/
	$(GO) test -run '^$$' -bench 'BenchmarkOver|BenchmarkArticles' -benchtime 3x ./nntpserve/
	@echo "== 32 stalled readers of a 51 MB message over IMAP and NNTP: peak RSS, spooled beside held in memory (as before)"
	$(GO) test -run '^$$' -bench BenchmarkStalledReaders -benchtime 1x ./imapserve/ ./nntpserve/
	@echo "== one byte of a 51 MB message over IMAP (BODY.PEEK[]<0.1>): CPU per FETCH from a lingering spool file, written again each time, and held in memory (as before)"
	$(GO) test -run '^$$' -bench BenchmarkPartialFetch -benchtime 30x ./imapserve/
	$(GO) test -run '^$$' -bench BenchmarkDovecotFirstPass -benchtime 1x ./imapwatch/
	@echo "== mirrors: the corpus through the change feed in one process, then the whole list's size between processes"
	$(GO) test -run '^$$' -bench BenchmarkMirror -benchtime 3x ./mirror/
	$(GO) run ./internal/tools/mirrorbench --corpus $(CORPUS) --bin $(BIN)

# What grows with the archive (issue 37; docs/performance.md, Scale):
# SIZE distinct messages made from the sample in LISTS lists, a share of
# threads cross-posted (internal/tools/scalegen), imported list by list
# into one archive (each list's msg/s and peak RSS), then resolver
# reindex and compact (time, peak RSS), the store and catalog per input
# byte, a fixed set of searches and pages cold and warm (p50, p99); all
# again at SIZE/10, and each figure beside the other with their ratio.
# SCALEDIR keeps the generated mboxes there and reuses them (default: a
# temporary directory, removed). SIZE=100000: about 15 minutes on 2
# shared cores, 1 GB of mbox and 2 GB of disk at most. RIAK=kit also
# imports each size into a fresh archive on a cluster of RIAK_NODES nodes
# started from the Riak test kit (RIAK=host:8087,... for running nodes)
# and builds a catalog from it, beside bbolt's figures.
SIZE       ?= 100000
LISTS      ?= 11
SCALEDIR   ?=
RIAK       ?=
RIAK_NODES ?= 3
bench-scale: build
	$(GO) run ./internal/tools/scalebench --bin $(BIN) --corpus $(CORPUS) --size $(SIZE) --lists $(LISTS) $(if $(SCALEDIR),--dir $(SCALEDIR)) $(if $(RIAK),--riak $(RIAK) --riak-nodes $(RIAK_NODES))

# The crash-and-race harness (e2e/torture_test.go) for ROUNDS rounds on
# bbolt, then on Riak when the test kit is there; SEED replays a schedule
# (a failure names its seed). make test runs 3 rounds of each. Then the
# Riak fault tests (nodes killed and restarted; about 20 minutes, with
# the test kit): groups serve again once every node is back.
ROUNDS ?= 40
torture:
	CHIBRARY_TORTURE_ROUNDS=$(ROUNDS) $(if $(SEED),CHIBRARY_TORTURE_SEED=$(SEED)) $(GO) test -count=1 -v -run '^TestTorture' -timeout 0 ./e2e/
	CHIBRARY_RIAK_FAULTS=1 $(GO) test -count=1 -v -run 'TestConsensusAfterFaults|TestRestartKeepsConsensus' -timeout 60m ./store/riakstore/ ./internal/testkit/riaktest/

# The hostile-client suite (issue 38's attacks, each a test that make
# test runs too): IMAP, NNTP and HTTP connections cut at every stage
# (their places come back, the server stops at once), silent ones closed
# at the first-read deadline, serve stopping within seconds with readers
# stalled on every protocol, stalled readers of large messages (bounded
# memory), slow and resumed downloads, change feed pollers beside a
# mirror, a mirror against a hostile origin (endless leases and
# messages, stalls, mass and future removals, a web page), a near copy
# of a removed message, removal reasons that reverse text, /healthz
# while Riak's groups cannot serve, client errors as the client's. A
# minute or two on a quiet machine; -v to watch each. The Riak fault
# tests are make torture's; the 32-reader RSS figures make bench's.
HOSTILE_RUN := TestCutConnections|TestStalledReaders|TestHostile|TestClientErrors|TestRemovedArticle|TestWriteDeadlineMoves|TestSlowDownloads|TestStalledDownload|TestMboxRange|TestStalledReadersShareDownload|TestSlowReadersOfLargeBodies|TestFeedPollersDoNotLockOutMirrors|TestFeedGivesWayToReaders|TestEndlessLeases|TestStalledOrigin|TestMassRemoval|TestFutureRemoval|TestNotAFeed|TestHostileOrigin|TestOnceStalledOrigin|TestImportNearCopyOfRemoved|TestRemoved|TestCutDownloadStopsSpooling|TestFirstRead|TestEndlessMessages|TestHealthzConsensus|TestServeWaitsForCutRequests|TestServeStopsWithStalledReaders|TestCheckReason|TestReasonDirectionMarks|TestRemovedReasonIsolated|TestFirstReadHolds|TestCompressedBomb
hostile:
	$(GO) test -count=1 -race -run '^($(HOSTILE_RUN))$$' ./imapserve/ ./nntpserve/ ./internal/netserve/ ./internal/httpserve/ ./resolver/ ./cmd/resolver/ ./mirror/ ./cmd/mirror/ ./ingest/ ./store/ ./changes/

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
