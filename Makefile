# ANDREA Block Lab. Every target sets up what it needs on a fresh machine.
#   make book   build the course book into _build/html (warnings are errors)
#   make test   everything above, then the whole test suite
#   make bench  print the benchmark figures (loader, book build, autograding)
#   make lab    open the graded notebooks in JupyterLab
#   make release / make instructor / make grade SUBMISSIONS=...   for instructors
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all venv sysdeps book test bench lab selfcheck clean release instructor grade

all: book

# The virtual environment is rebuilt whenever requirements.txt changes.
$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (ANDREA Block Lab)" >/dev/null
	@# Kernels start in each notebook's own folder: make andrea_ref importable from anywhere.
	$(PY) -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], 'andrea_block_lab.pth').write_text('$(CURDIR)\n')"
	touch $@

venv: $(STAMP)

# Debian packages: Chromium for the browser tests; bubblewrap, prlimit and setpriv
# (util-linux) and libseccomp2 for the grading sandbox; PostgreSQL for the gradebook test.
sysdeps:
	@{ command -v chromium && command -v bwrap && command -v prlimit && command -v setpriv && \
	   { command -v initdb || ls /usr/lib/postgresql/*/bin/initdb; } && \
	   $(PYTHON) -c "import ctypes.util, sys; sys.exit(not ctypes.util.find_library('seccomp'))"; } >/dev/null 2>&1 || { \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO apt-get install -y -qq chromium bubblewrap util-linux postgresql libseccomp2 >/dev/null; }

# Regenerate exercises/ from solutions/ (records the assignments in gradebook.db).
release: $(STAMP)
	$(PY) scripts/release.py

# Instructor edition: the book plus every solution executed, in _build_instructor/_build/html.
instructor: $(STAMP)
	$(PY) -m classroom.instructor_book

# Grade a class: make grade SUBMISSIONS=folder-or-zip [WORKERS=n] [DB=url]
grade: $(STAMP) sysdeps
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-or-zip [WORKERS=n] [DB=url]" >&2; exit 2; }
	$(PY) -m classroom.grade "$(SUBMISSIONS)" $(if $(WORKERS),--workers $(WORKERS)) $(if $(DB),--db "$(DB)")

book: $(STAMP)
	$(PY) scripts/build_book.py

test: $(STAMP) sysdeps book
	$(PY) -m pytest

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

lab: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/jupyter lab --ServerApp.root_dir=. \
	  --LabApp.default_url=/lab/tree/exercises $(if $(filter 0,$(shell id -u)),--allow-root)

# On a CUDA machine: build the kernel, check it against torch and benchmark it. The
# figures are recorded in cuda/results/ (commit them; the book's kernel chapter shows them).
selfcheck: $(STAMP)
	mkdir -p cuda/results
	$(PY) -m andrea_ref.kernels.selfcheck --require-gpu --json cuda/results/selfcheck-$$(date +%Y-%m-%d).json

clean:
	rm -rf _build _build_instructor .pytest_cache
