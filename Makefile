# make demo   compile examples/blur.hl (the 2012 paper's tiled schedule) and run it on a bundled image
# make test   run the test suite
# make bench  hdsl against Halide, OpenCV and NumPy/SciPy (benchmarks/RESULTS.md, AUTOSCHED.md, CALLPATH.md); BENCH_QUICK=1 for small sizes
# make wheel  build dist/hdsl-VERSION-py3-none-any.whl (grammar, stdlib and runtime source inside)
# make vsix   build dist/hdsl.vsix, the VS Code extension (editors/vscode; docs/editors.md)
# make parser-tables  rebuild hdsl/grammar/hdsl_lalr.pickle (the parser's LALR tables) after editing the grammar
# make playground  serve the web playground on http://127.0.0.1:8000/ (PORT=N for another; docs/playground.md)
VENV   := .venv
PYTHON := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv mesa demo test test-slow bench wheel vsix parser-tables playground playground-bundle browser clean distclean

venv: $(STAMP)

# Reinstall only when pyproject.toml changed since the last install (the
# install is editable, so source edits need none).
$(STAMP): pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q -e '.[test]'
	touch $@

demo: venv
	mkdir -p out
	$(VENV)/bin/hdsl run examples/blur.hl --input img=examples/images/gray16.png \
		--output out/blur.png --time 10
	$(VENV)/bin/hdsl run examples/blur.hl --input img=examples/images/gray16.png \
		--output out/blur_interp.png --target interp
	$(PYTHON) -c "import numpy as np; from hdsl.runtime.images import load_image as l; \
		assert np.array_equal(l('out/blur.png'), l('out/blur_interp.png')); print('demo: native == reference')"
	@echo "demo: wrote $(CURDIR)/out/blur.png (blurred examples/images/gray16.png)"

# VS Code's tokenizer (vscode-textmate, vscode-oniguruma) for tests/editor, at the
# versions pinned in editors/vscode/package-lock.json; reinstalled only when that changes
NODE_STAMP := editors/vscode/node_modules/.package-lock.json
$(NODE_STAMP): editors/vscode/package-lock.json
	cd editors/vscode && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# the VS Code extension, dist/hdsl.vsix (highlighting, snippets, and `hdsl lsp` started for .hl files)
VSCE := @vscode/vsce@3.7.1
vsix: $(NODE_STAMP)
	mkdir -p dist
	cd editors/vscode && npx --yes $(VSCE) package --skip-license --allow-missing-repository -o ../../dist/hdsl.vsix

# Mesa's OpenGL (llvmpipe: OpenGL 4.5 on the CPU, headless through EGL) for the OpenGL back end's
# tests, installed with apt only when a package is missing (CI runs as root; a machine that has
# them runs no apt at all). Debian/Ubuntu package names; docs/opengl.md says what they are for.
MESA_PKGS := libegl1 libegl-mesa0 libgl1-mesa-dri libgles2 libgl1 libglx-mesa0
mesa:
	@missing=$$(for p in $(MESA_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
		| grep -q '^install ok installed$$' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Mesa for the OpenGL tests: $$missing"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

# The playground's editor bundle (CodeMirror 6 and the page's script, playground/web/src) at the
# versions pinned in playground/web/package-lock.json, built by esbuild into the package
# (hdsl/playground/static/editor.js: package data, shipped in the wheel, never committed)
PG_WEB := playground/web
PG_NODE_STAMP := $(PG_WEB)/node_modules/.package-lock.json
PG_BUNDLE := hdsl/playground/static/editor.js
$(PG_NODE_STAMP): $(PG_WEB)/package-lock.json
	cd $(PG_WEB) && npm ci --no-audit --no-fund --loglevel=error
	touch $@
$(PG_BUNDLE): $(PG_NODE_STAMP) $(PG_WEB)/package.json $(wildcard $(PG_WEB)/src/*.js)
	cd $(PG_WEB) && npm run --silent build
playground-bundle: $(PG_BUNDLE)

playground: venv $(PG_BUNDLE)
	$(VENV)/bin/hdsl playground $(if $(PORT),--port $(PORT))

# headless Chromium and its driver for the playground's browser tests (tests/playground), from
# Debian's packages when missing (Playwright's own browser download does not work offline)
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -q && apt-get install -y -q --no-install-recommends chromium chromium-driver)

test: venv mesa $(NODE_STAMP) $(PG_BUNDLE) browser
	$(PYTHON) -m pytest -n 2 -q

# the long sweeps (hypothesis with many examples, thousands of mutated programs) that `make test` runs in a small form
test-slow: venv
	$(PYTHON) -m pytest -n 2 -q -m slow

BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PYTHON) -m pip install -q -e '.[test,bench]'
	touch $@

# (callpath.py first: run.py judges issue 22 from its callpath.json beside its own numbers)
BENCH_OUT := $(if $(BENCH_QUICK),out/bench-quick,benchmarks)
bench: $(BENCH_STAMP)
	$(PYTHON) benchmarks/callpath.py $(if $(BENCH_QUICK),--quick) --out $(BENCH_OUT)
	$(PYTHON) benchmarks/run.py $(if $(BENCH_QUICK),--quick) --out $(BENCH_OUT) --callpath $(BENCH_OUT)/callpath.json
	$(PYTHON) benchmarks/autosched.py $(if $(BENCH_QUICK),--quick) --out $(BENCH_OUT)

# the wheel users install (tests/test_install.py builds one the same way and runs it)
parser-tables: venv
	$(PYTHON) -c 'from hdsl.frontend.parse import write_tables; print(write_tables())'

wheel: venv $(PG_BUNDLE)
	$(PYTHON) -m pip wheel --no-deps --no-build-isolation -q -w dist .

# Build outputs and caches; keeps the virtual environment (see distclean).
clean:
	rm -rf out build dist .pytest_cache .hypothesis
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name '*.egg-info' \) \
		-type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
