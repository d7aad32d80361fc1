# One entry point for developers and CI. `make demo` and `make test` do all set-up themselves:
# toolchain builds and jars are cached under $(CACHE) (pinned in hack/versions.env), the Python
# environment lives in .venv (pinned in constraints.txt).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
CACHE ?= $(HOME)/.cache/connect-offsets
export CONNECT_OFFSETS_CACHE := $(CACHE)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
PYTEST_ARGS ?=

.PHONY: help deps bytecode go-tools node kafka rest-bearer spark-jars venv stack-up stack-down stack-status lint unit integration test test-compat test-load image test-image demo bench plugin krew lock clean

help:
	@echo "make demo        set up everything, start the stack, run the demo"
	@echo "make test        set up everything; lint, mypy, unit and integration tests"
	@echo "make test-compat  the core flows against every Connect version of the matrix"
	@echo "make image       build the operator image with podman, no registry needed (hack/build-image.sh)"
	@echo "make test-image  build it and run the operator from it against the stack (one list, one alter)"
	@echo "make bench       run the benchmarks in bench/ and record results in bench/README.md"
	@echo "make plugin      build the kubectl plugin as one file that needs no Python (build/plugin/)"
	@echo "make krew        that file's krew archive and manifest (build/plugin/krew/)"
	@echo "make stack-up    start the local stack (etcd, kube-apiserver, Kafka x2, Connect)"
	@echo "make stack-down  stop it and remove its data"

deps: go-tools node kafka rest-bearer spark-jars venv bytecode

# The package's and the tests' bytecode, written ahead: where PYTHONDONTWRITEBYTECODE is set (this
# machine's environment sets it) every operator, CLI and plugin process a test starts would
# otherwise compile the editable package from source again, ~0.2 s of CPU each (issue 32). Only
# files changed since their .pyc are compiled; a stale one is ignored by Python, never used.
bytecode: venv
	@$(VPY) -m compileall -q -j 0 operator/src tests hack bench

go-tools:
	@bash hack/build-go-tools.sh

# The stack's node, where make test runs the chart's Pods (tests/integration/test_node_chart.py, which
# also builds the image with hack/build-image.sh): its Debian packages (containerd, runc, iptables,
# podman, debootstrap; apt-get, so root) only when one is missing or at another version, then its Go
# binaries (kubelet, kube-scheduler, kube-proxy, CNI plugins, crictl; cached, ~80 s cold).
node: go-tools
	@bash hack/node-packages.sh --check 2>/dev/null || bash hack/node-packages.sh
	@bash hack/build-node.sh

# The stack's Kafka, plus the oldest Connect of the version matrix (make test runs it).
COMPAT_VERSIONS = $(shell bash -c 'source hack/versions.env && echo $$CONNECT_COMPAT_VERSIONS')
TOO_OLD_VERSION = $(shell bash -c 'source hack/versions.env && echo $$CONNECT_TOO_OLD_VERSION')
kafka:
	@bash hack/fetch-kafka.sh
	@bash hack/fetch-kafka.sh $(firstword $(COMPAT_VERSIONS))

# The test worker's bearer-token REST extension (hack/rest-bearer, tests/integration/test_connect_bearer.py).
rest-bearer:
	@bash hack/build-rest-bearer.sh >/dev/null

spark-jars:
	@bash hack/fetch-spark-jars.sh

venv: $(STAMP)
$(STAMP): pyproject.toml constraints.txt
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	@PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(VPY) -m pip install -q --disable-pip-version-check -e '.[dev,spark]'
	@rm -f $(VENV)/.installed-* && touch $@

stack-up: go-tools kafka
	@$(PYTHON) hack/stack.py up

stack-down:
	@$(PYTHON) hack/stack.py down

stack-status:
	@$(PYTHON) hack/stack.py status

# mypy's cache lives beside the stack's downloads: a clean clone (CI) checks only what changed
# (8.5 s cold, 0.3 s warm; mypy validates each cached module by its source's hash, so a stale
# entry is never used).
lint: venv
	$(VENV)/bin/ruff check operator/src tests hack bench
	$(VENV)/bin/ruff format --check operator/src tests hack bench
	$(VENV)/bin/mypy --strict --cache-dir $(CACHE)/mypy operator/src/connect_offsets
	$(VENV)/bin/lint-imports

unit: go-tools venv
	$(VENV)/bin/pytest -m unit $(PYTEST_ARGS)

# Parallel test processes for make test and make integration (pytest-xdist on the one stack; they
# mostly wait, so 5 on 2 cores): hack/suite.py runs the parallel part (integration), then the serial
# part (tests marked `serial`) with the unit tests beside it at nice 19, and prints one summary with
# the wall time. TEST_WORKERS=1 runs everything in order.
TEST_WORKERS ?= 5
SUITE := $(VPY) hack/suite.py --workers $(TEST_WORKERS)

integration: deps
	$(SUITE) -m "integration and not load and not compat_extra and not image" $(PYTEST_ARGS)

# The whole suite: static checks first (cheap), then unit and integration tests (hack/suite.py),
# the parallel part beside other work on the stack (--busy: hack/busy_stack.py run, issue 48).
test: deps lint
	$(SUITE) --busy -m "(unit or integration) and not load and not compat_extra and not image" $(PYTEST_ARGS)

# The Connect version matrix (issue 21): the core flows, MirrorMaker 2 list/alter, the offline CLI
# round trip and Connect's refusals kept verbatim against every CONNECT_COMPAT_VERSIONS worker (one at
# a time) and the ConnectTooOld condition on CONNECT_TOO_OLD_VERSION. A selection:
# make test-compat COMPAT_VERSIONS="4.3.1"
test-compat: deps
	@bash hack/fetch-kafka.sh $(COMPAT_VERSIONS) $(TOO_OLD_VERSION)
	CONNECT_COMPAT_VERSIONS="$(COMPAT_VERSIONS)" $(VENV)/bin/pytest -m compat $(PYTEST_ARGS) tests/integration/test_connect_versions.py

# The load test (issue 10): 200 connectors, 100 lists, 50 stop -> change -> resume on a dedicated
# worker. Minutes of Connect rebalances on 2 cores, so it runs on its own, not in every make test.
test-load: deps
	$(VENV)/bin/pytest -m load $(PYTEST_ARGS)

# The operator image (issue 22), built with podman from operator/Dockerfile without a registry: a
# debootstrapped Debian base (cached under $(CACHE)/image) unless BASE_IMAGE is given; tagged
# $${IMAGE_REPOSITORY:-localhost/connect-offsets-operator}:<pyproject version>. Needs podman, and
# debootstrap + root for the base (docs/development.md#the-operator-image).
image:
	@bash hack/build-image.sh >/dev/null

# The operator run from that image against the stack (tests/integration/test_image.py; it runs
# hack/build-image.sh itself, a no-op when nothing changed). Not part of make test.
test-image: deps image
	$(VENV)/bin/pytest -m image $(PYTEST_ARGS) tests/integration/test_image.py

# Benchmarks: every bench/bench_*.py (or BENCH=name for bench/bench_name.py), stack started if needed.
BENCH ?=
bench: deps
	@$(PYTHON) hack/stack.py up
	@set -e; for f in $(if $(BENCH),bench/bench_$(BENCH).py,bench/bench_*.py); do \
	  echo "== $$f"; $(VPY) $$f; done

demo: deps
	@$(PYTHON) hack/stack.py up
	@$(VPY) hack/demo.py

# The kubectl plugin as one file that needs no Python (issue 49): build/plugin/kubectl-connect_offsets, a
# PyInstaller binary, and kubectl's completion executable beside it (hack/build_plugin.py; cached under
# $(CACHE)/plugin, rebuilt only when the plugin's sources or pins change). See docs/kubectl-plugin.md.
plugin: venv
	@$(VPY) hack/build_plugin.py

# Its krew archive and the manifest that pins it (build/plugin/krew/, rendered from
# deploy/krew/connect-offsets.yaml), checked after rendering; see docs/kubectl-plugin.md (Install with krew).
krew: plugin
	@$(PYTHON) hack/krew.py
	@$(PYTHON) hack/krew.py --check

lock:
	$(PYTHON) -m venv /tmp/connect-offsets-lock && /tmp/connect-offsets-lock/bin/pip install -q -e '.[dev]' hatchling
	( echo "# Exact versions for reproducible installs (pip install -c constraints.txt). Regenerate with 'make lock'."; \
	  /tmp/connect-offsets-lock/bin/pip freeze --exclude-editable ) > constraints.txt

clean: stack-down
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
