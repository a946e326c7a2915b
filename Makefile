# clusterhealth: the two commands a newcomer needs are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
SOURCES := core agent remedy mci-provider controlplane cli
# the test and demo harness: linted and type-checked like the product, never shipped
HARNESS := localenv
LINT_PATHS := $(SOURCES) $(HARNESS) tests bench

.PHONY: setup demo test lint unit bench clean image lock charts

setup:
	@./scripts/bootstrap.sh

demo: setup
	$(PY) -m clusterhealth_localenv.demo

lint: setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy $(SOURCES) $(HARNESS) bench
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest -q -p no:cacheprovider

bench: setup
	$(PY) -m bench.foundation --markdown docs/benchmarks.md
	$(PY) -m bench.agent --markdown docs/benchmarks.md
	$(PY) -m bench.remedy --markdown docs/benchmarks.md
	$(PY) -m bench.workload_members --markdown docs/benchmarks.md
	$(PY) -m bench.real_nodes --markdown docs/benchmarks.md
	$(PY) -m bench.remedy --flips 0 --scales 10000x1000 --rounds 1 --changes 2 --no-httpx \
		--section "## Remedy controller at 10,000 clusters (issue 13)" --markdown docs/benchmarks.md
	$(PY) -m bench.kopf_compare --markdown docs/benchmarks.md
	$(PY) -m bench.mci --markdown docs/benchmarks.md
	$(PY) -m bench.informer --markdown docs/benchmarks.md
	$(PY) -m bench.election --markdown docs/benchmarks.md
	$(PY) -m bench.karmada_env --markdown docs/benchmarks.md
	$(PY) -m bench.scheduler --markdown docs/benchmarks.md
	$(PY) -m bench.propagation --markdown docs/benchmarks.md
	$(PY) -m bench.eviction --markdown docs/benchmarks.md
	$(PY) -m bench.failover --markdown docs/benchmarks.md
	$(PY) -m bench.hung_member --markdown docs/benchmarks.md
	$(PY) -m bench.failover_peer --markdown docs/benchmarks.md
	$(PY) -m bench.installed --markdown docs/benchmarks.md

# The images (docs/operations.md, "Images"): clusterhealth (every component) and
# clusterhealth-haproxy (the MCI chart's sidecar). With a Docker daemon or buildah they
# build the Dockerfiles; otherwise clusterhealth_localenv.images executes the same files
# without a daemon (root; writes archives for `docker load` / `ctr images import`).
TAG ?= 0.1.0
IMAGE_BUILDER ?= $(shell if docker info >/dev/null 2>&1; then echo docker; \
	elif command -v buildah >/dev/null 2>&1; then echo buildah; else echo daemonless; fi)
image:
ifeq ($(IMAGE_BUILDER),docker)
	docker build -t clusterhealth:$(TAG) -f Dockerfile .
	docker build -t clusterhealth-haproxy:$(TAG) -f image/haproxy.Dockerfile .
else ifeq ($(IMAGE_BUILDER),buildah)
	buildah bud --layers -t clusterhealth:$(TAG) -f Dockerfile .
	buildah bud --layers -t clusterhealth-haproxy:$(TAG) -f image/haproxy.Dockerfile .
else
	@$(MAKE) --no-print-directory setup
	$(PY) -m clusterhealth_localenv.images --tag $(TAG)
endif

# the charts as a Helm chart repository folder (docs/operations.md, "Charts from a repository")
charts: setup
	HELM=$$($(PY) -c 'from clusterhealth_localenv import binaries; print(binaries.ensure_helm())') \
		scripts/package-charts.sh dist/charts

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# The image's hashed lock files (image/*.lock) from pyproject.toml's runtime dependencies
# and build requirements; tests/test_image.py fails when they disagree with pyproject.toml.
UV_VERSION := 0.9.30
LOCK_FLAGS := --quiet --generate-hashes --python-version 3.11 --python-platform linux \
	--custom-compile-command "make lock"
lock:
	$(VENV)/bin/pip install -q "uv==$(UV_VERSION)"
	$(VENV)/bin/uv pip compile $(LOCK_FLAGS) --no-strip-extras pyproject.toml \
		-o image/requirements.lock
	$(PY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' \
		> build/build-requirements.in
	$(VENV)/bin/uv pip compile $(LOCK_FLAGS) build/build-requirements.in \
		-o image/build-requirements.lock
