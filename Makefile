# clusterhealth: the two commands a newcomer needs are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
SOURCES := core agent remedy mci-provider controlplane cli
LINT_PATHS := $(SOURCES) tests bench

.PHONY: setup demo test lint unit bench clean charts

setup:
	@./scripts/bootstrap.sh

demo: setup
	$(PY) -m clusterhealth_localenv.demo

lint: setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy $(SOURCES) bench
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest -q -p no:cacheprovider

bench: setup
	$(PY) -m bench.foundation --markdown docs/benchmarks.md
	$(PY) -m bench.agent --markdown docs/benchmarks.md
	$(PY) -m bench.remedy --markdown docs/benchmarks.md
	$(PY) -m bench.workload_members --markdown docs/benchmarks.md
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

# the charts as a Helm chart repository folder (docs/operations.md, "Charts from a repository")
charts: setup
	HELM=$$($(PY) -c 'from clusterhealth_localenv import binaries; print(binaries.ensure_helm())') \
		scripts/package-charts.sh dist/charts

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
