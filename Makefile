# Two entry points: `make serve` (run Rewind on the embedded store) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JS_DEPS := tests/js/node_modules/.installed

.PHONY: serve test check lint bench clean

# `make serve` installs what serving needs (the server extra, and mcp for the worker's /mcp);
# `make test` everything the tests drive (the dev extra: SDKs, frameworks, the browser driver),
# which serving needs too.
SERVE_STAMP := $(VENV)/.installed-serve
SERVE_EXTRAS := server,mcp
define install
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[$(1)]"
endef

$(SERVE_STAMP): pyproject.toml
	$(call install,$(SERVE_EXTRAS))
	touch $(SERVE_STAMP)

$(STAMP): pyproject.toml
	$(call install,dev)
	touch $(STAMP) $(SERVE_STAMP)

# JavaScript agents the tests record with other teams' instrumentations (skipped without npm).
$(JS_DEPS): tests/js/package.json
	@if command -v npm >/dev/null; then \
		npm install --prefix tests/js --no-package-lock --no-audit --no-fund --silent && \
		touch $(JS_DEPS) || echo "npm install failed: the JavaScript instrumentation tests are skipped"; \
	else echo "npm not found: the JavaScript instrumentation tests are skipped"; fi

serve: $(SERVE_STAMP)
	$(BIN)/rewind serve

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint $(JS_DEPS)
	$(BIN)/python -m pytest

# The one-minute loop: lint, then the tests that start no process or server and open no store,
# browser, database or agent framework (tests/support/weights.py weighs each module).
check: lint
	$(BIN)/python -m pytest -m unit -q

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
