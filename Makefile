# The two commands a newcomer needs are `make run` and `make test`; the rest
# are their parts. Everything the targets install comes from apt-get or go.
SHELL := bash
GO    ?= go
BIN   := $(CURDIR)/bin

# Where `make cluster-up` keeps the local control plane's data.
CLUSTER_DIR ?= $(or $(TMPDIR),/tmp)/virtual-kubelet/local

# `make run` and `make cluster-up` run metrics-server (kubectl top, the
# HorizontalPodAutoscaler); METRICS_SERVER=0 leaves it out.
METRICS_SERVER ?= 1
metrics_server_flag = $(if $(filter-out 0,$(METRICS_SERVER)),--metrics-server "$$(hack/metrics-server/build.sh)")

# Stamped into the binary and the image.
VERSION    ?= $(shell git describe --tags --match 'v*' 2>/dev/null || echo v0.1.0-dev)
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_TAGS ?=
# build-static's path flag: -trimpath keeps the build machine's paths out of
# the image's binary. make test's check of the static build sets it empty, so
# that it reuses the packages the control plane's build compiled (the same
# versions and CGO_ENABLED=0) instead of compiling the graph once more.
STATIC_PATHS ?= -trimpath
IMAGE      ?= virtual-kubelet:$(VERSION)
LDFLAGS    := -X github.com/vkubelet/virtual-kubelet/internal/version.Version=$(VERSION) \
              -X github.com/vkubelet/virtual-kubelet/internal/version.GitCommit=$(GIT_COMMIT)

.PHONY: all build proto build-static image test fuzz run run-two-clusters run-slurm cluster-up cluster-down controlplane bench bench-ab soak docs vet lint fmt clean

all: build

build: ## the daemon, the slurm provider's container launcher and the cluster helper, into bin/
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/virtual-kubelet ./providers/slurm/cmd/virtual-kubelet-slurm-container ./hack/cluster

proto: ## regenerate plugin/providerv1alpha1 from proto/ (protoc from apt, generators pinned in hack/proto/gen.sh)
	BIN=$(BIN) hack/proto/gen.sh

build-static: ## the image's binary, static (CGO_ENABLED=0), without Docker: bin/virtual-kubelet-static
	CGO_ENABLED=0 $(GO) build $(STATIC_PATHS) -tags "$(BUILD_TAGS)" -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/virtual-kubelet-static ./cmd/virtual-kubelet

image: ## the container image (needs a Docker engine)
	@docker info >/dev/null 2>&1 || { echo "make image needs a running Docker engine; make build-static builds the same binary without one" >&2; exit 1; }
	docker build --build-arg VERSION=$(VERSION) --build-arg GIT_COMMIT=$(GIT_COMMIT) --build-arg BUILD_TAGS="$(BUILD_TAGS)" -t $(IMAGE) .

controlplane: ## build (or find cached) etcd, kube-apiserver, ..., kubectl and metrics-server
	@hack/controlplane/build.sh >/dev/null
	@hack/metrics-server/build.sh >/dev/null

cluster-up: build ## start a local control plane on loopback; prints its kubeconfig
	@$(BIN)/cluster up --dir $(CLUSTER_DIR) --bin-dir "$$(hack/controlplane/build.sh)" $(metrics_server_flag)

cluster-down: build ## stop it and remove its data
	@$(BIN)/cluster down --dir $(CLUSTER_DIR)

run: build ## local control plane (unless KUBECONFIG is set) + the mock node vk0
	@CLUSTER_DIR=$(CLUSTER_DIR) BIN=$(BIN) METRICS_SERVER=$(METRICS_SERVER) hack/run.sh

# Where `make run-two-clusters` keeps cluster B (cluster A is CLUSTER_DIR).
CLUSTER_B_DIR ?= $(or $(TMPDIR),/tmp)/virtual-kubelet/cluster-b

run-two-clusters: build ## clusters A and B; node vk-b of A runs its pods in B (--provider kubernetes)
	@CLUSTER_DIR=$(CLUSTER_DIR) CLUSTER_B_DIR=$(CLUSTER_B_DIR) BIN=$(BIN) METRICS_SERVER=$(METRICS_SERVER) hack/run-two-clusters.sh

run-slurm: build ## local control plane + a one-node Slurm on loopback; node vk-slurm runs its pods as Slurm jobs (--provider slurm, root)
	@CLUSTER_DIR=$(CLUSTER_DIR) BIN=$(BIN) METRICS_SERVER=$(METRICS_SERVER) hack/slurm/run.sh

test: ## go vet, unit and e2e tests, all with -race, against a real control plane
	@hack/test.sh

# How long `make fuzz` runs each target.
FUZZTIME ?= 60s

fuzz: ## every fuzz target for FUZZTIME, one after another, one worker each; crashers land in testdata/fuzz
	@FUZZTIME=$(FUZZTIME) hack/fuzz.sh

# N pod counts for `make bench`; BENCH_ARGS adds flags (go run ./hack/bench -h).
# Results, profiles and logs go outside the repository: it holds no bench output.
BENCH_N    ?= 300,1000,5000,10000
BENCH_DIR  ?= $(or $(TMPDIR),/tmp)/virtual-kubelet/bench
BENCH_OUT  ?= $(BENCH_DIR)
BENCH_ARGS ?=

# KWOK=0 leaves kwok out of `make bench`.
KWOK ?= 1
kwok_flag = $(if $(filter-out 0,$(KWOK)),-kwok "$$(hack/kwok/build.sh)")
# The bench runs the image's binary (build-static): kwok, its peer, is built
# the same way (CGO_ENABLED=0, hack/kwok/build.sh), so that neither maps libc.
bench: build-static ## the bench against the local control plane (make cluster-up first), floor, kwok and daemon; results in BENCH_OUT ($(BENCH_DIR) by default)
	$(GO) run ./hack/bench -cluster $(CLUSTER_DIR) -n $(BENCH_N) -binary $(BIN)/virtual-kubelet-static -out $(BENCH_OUT) $(kwok_flag) $(BENCH_ARGS)

# Pod counts and results of `make bench-ab` (BENCH_ARGS applies too, e.g.
# '-remote-qps 500 -remote-burst 1000').
BENCH_AB_N   ?= 1000
BENCH_AB_OUT ?= $(BENCH_DIR)/ab

bench-ab: build ## A→B: --provider kubernetes in CLUSTER_DIR running its pods in CLUSTER_B_DIR (cluster-up both first); ratios to both floors' sum
	$(GO) run ./hack/bench -cluster $(CLUSTER_DIR) -remote-cluster $(CLUSTER_B_DIR) -n $(BENCH_AB_N) -binary $(BIN)/virtual-kubelet -out $(BENCH_AB_OUT) $(BENCH_ARGS)

# How long `make soak` runs, where its report goes, and more -soak-* flags
# (go run ./hack/bench -h), e.g. SOAK_ARGS='-soak-rate 500'.
SOAK_DURATION ?= 1h
SOAK_OUT      ?= $(BENCH_DIR)/soak
SOAK_ARGS     ?=

soak: build ## leak hunt against the local control plane (make cluster-up first, as root): SOAK_DURATION (1h) of pod churn, streams and API server restarts on a 1-node and a 50-node daemon; trends of goroutines, fds, heap and RSS in SOAK_OUT
	$(GO) run ./hack/bench -cluster $(CLUSTER_DIR) -soak $(SOAK_DURATION) -binary $(BIN)/virtual-kubelet -cluster-binary $(BIN)/cluster -out $(SOAK_OUT) $(SOAK_ARGS)

docs: ## regenerate docs/flags.md from the command's flags (a test fails when it is stale)
	$(GO) run ./hack/gendocs -out docs/flags.md

vet: ## go vet, the e2e tests (-tags e2e) included
	$(GO) vet -tags e2e ./...

lint: ## golangci-lint (pinned; .golangci.yml says which linters and why)
	hack/lint.sh

fmt:
	gofmt -l -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
