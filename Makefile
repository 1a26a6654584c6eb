# The two commands a newcomer needs are `make run` and `make test`; the rest
# are their parts. Everything the targets install comes from apt-get or go.
SHELL := bash
GO    ?= go
BIN   := $(CURDIR)/bin

# Where `make cluster-up` keeps the local control plane's data.
CLUSTER_DIR ?= $(or $(TMPDIR),/tmp)/virtual-kubelet/local

.PHONY: all build test run cluster-up cluster-down controlplane vet fmt clean

all: build

build: ## the daemon and the cluster helper, into bin/
	$(GO) build -o $(BIN)/ ./cmd/virtual-kubelet ./hack/cluster

controlplane: ## build (or find cached) etcd, kube-apiserver, ... and kubectl
	@hack/controlplane/build.sh >/dev/null

cluster-up: build ## start a local control plane on loopback; prints its kubeconfig
	@$(BIN)/cluster up --dir $(CLUSTER_DIR) --bin-dir "$$(hack/controlplane/build.sh)"

cluster-down: build ## stop it and remove its data
	@$(BIN)/cluster down --dir $(CLUSTER_DIR)

run: build ## local control plane (unless KUBECONFIG is set) + the mock node vk0
	@CLUSTER_DIR=$(CLUSTER_DIR) BIN=$(BIN) hack/run.sh

test: ## go vet, unit and e2e tests, all with -race, against a real control plane
	@BIN=$(BIN) hack/test.sh

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
