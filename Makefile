# `make demo` and `make test` work on a fresh machine with only python3: they create .venv, install, then run.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed-stamp
DEMO_STAMP := $(VENV)/.demo-stamp
DEMO   := src/tracetochain/datasets/data/tau_airline_sample.jsonl

.PHONY: demo test test-slow test-all test-fast lint typecheck bench bench-more bench-scale bench-startup clean install

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# Two stamps: the demo needs only the runtime dependencies (`pip install -e .`, a few hundred MB); the tests add the
# test and dev extras (every optional dependency, playwright, dask, ruff, mypy) and, if it installs, stormpy.
$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PIP) install --quiet -e .
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[test,dev]"
	# The exact oracle (stormpy) is optional: tests that need it are skipped when it cannot be installed here.
	-$(PIP) install --quiet "stormpy==2.0.0" "sympy>=1.12" || echo "note: stormpy not installable here; oracle tests will be skipped"
	touch $(STAMP) $(DEMO_STAMP)

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/tracetochain fit $(DEMO) -o out/demo-chain.json --force
	$(VENV)/bin/tracetochain metrics out/demo-chain.json --horizon 30
	$(VENV)/bin/tracetochain report $(DEMO) --states ward --vocabulary chat -o out/demo-report.html --force

# The fast tier (what a developer runs; its budget is 4 CPU-minutes, user + sys of `time make test`, i.e. about
# 2 min on 2 idle cores), one pytest worker per core (pytest-xdist; each test file stays on one worker). CI runs it,
# then the slow tier. A test that takes a second or more is marked slow (`pytest -m 'not slow' --durations=30`
# lists the ones that have grown).
TEST_WORKERS ?= auto
# One BLAS thread per worker (tests/conftest.py says why; set here too, before any plugin imports numpy).
BLAS_ONE_THREAD = OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
test: $(STAMP)
	$(BLAS_ONE_THREAD) $(PY) -m pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile

# Studies, large simulations, calibration runs (levels, coverage) and resource measurements (pytest -m slow).
test-slow: $(STAMP)
	$(BLAS_ONE_THREAD) $(PY) -m pytest -m slow -n $(TEST_WORKERS) --dist loadfile

test-all: $(STAMP)
	$(PY) -m pytest

test-fast: test

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

# The benchmarks of the README's performance section (~15 min on 2 cores, data generation included), then the
# section itself, regenerated from benchmarks/results/*.json. Each script also runs alone (benchmarks/README.md).
BENCH_STAMP := $(VENV)/.bench-stamp
$(BENCH_STAMP): pyproject.toml | $(STAMP)
	$(PIP) install --quiet -e ".[bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) benchmarks/bench_scale.py
	$(PY) benchmarks/bench_protocols.py
	$(PY) benchmarks/bench_peers.py
	$(PY) benchmarks/bench_horizon.py
	$(PY) benchmarks/bench_startup.py
	$(PY) benchmarks/bench_install.py
	$(PY) benchmarks/bench_commands.py
	$(PY) benchmarks/render_readme.py

# `import tracetochain` and `--help` times, then the README section.
bench-startup: $(BENCH_STAMP)
	$(PY) benchmarks/bench_startup.py
	$(PY) benchmarks/render_readme.py

# The single-process benchmarks behind the README's last table (fit, states, audit, intervals, OTLP streaming).
bench-more: $(BENCH_STAMP)
	$(PY) benchmarks/bench_fit.py
	$(PY) benchmarks/bench_states.py
	$(PY) benchmarks/bench_audit.py
	$(PY) benchmarks/bench_uncertainty.py
	$(PY) benchmarks/bench_otlp_stream.py
	$(PY) benchmarks/render_readme.py

# Partitioned ingest + fit (+ audit + intervals) on the local engine and a 2-worker Dask local cluster.
bench-scale: $(BENCH_STAMP)
	$(PY) benchmarks/bench_scale.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache

# The paper's studies side by side with its numbers (studies/README.md). Full runs are archived in studies/results/
# (under 30 min on 2 cores); the quick tier writes to studies/results/quick/ and is also run by tests/test_studies.py.
.PHONY: studies studies-quick
studies: $(STAMP)
	$(PY) -m studies all

studies-quick: $(STAMP)
	$(PY) -m studies all --quick --quiet
