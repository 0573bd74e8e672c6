# ANDREA Block Lab. Every target sets up what it needs on a fresh machine.
#   make book   build the course book into _build/html, in English, German (de/) and
#               Georgian (ka/) (warnings are errors)
#   make test   everything above, then the whole test suite
#   make test-fast   the quick loop: the reference package, the checks, the scoring rule (minutes)
#   make catalogs   update the German and Georgian catalogs after the English text changed
#   make bench  print the benchmark figures (loader, book build, autograding)
#   make test-cuda-build   build and link the CUDA kernel without a GPU (needs nvcc; CI runs it)
#   make lab    open the graded notebooks in JupyterLab, as a learner sees them
#   make learner-kit   the learner's kit: notebooks, course package (wheel), book
#   make release / make instructor / make grade SUBMISSIONS=...   for instructors
#   make demo   a demo class graded by the real grader (_build/demo/): what an instructor sees
#   make hub    run the course for a class on a JupyterHub on this machine (as root)
#   make test-class   the class on the hub, end to end in Chromium (as root; slow)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all venv sysdeps bookdeps mathdeps book catalogs test test-fast test-cuda-build bench lab lab-instructor learner-kit selfcheck clean release instructor grade demo hubdeps hub test-class test-envs

all: book

# The virtual environment is rebuilt whenever requirements.txt changes. PIP_INDEX_OPTS
# (default empty) passes index options to pip, e.g. PyTorch's CPU-only wheels (README).
$(STAMP): requirements.txt requirements-runtime.txt requirements-nodeps.txt requirements-remove.txt pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(PIP_INDEX_OPTS) --upgrade pip
	$(PY) -m pip install --quiet $(PIP_INDEX_OPTS) -r requirements.txt
	$(PY) -m pip install --quiet $(PIP_INDEX_OPTS) --no-deps -r requirements-nodeps.txt
	$(PY) -m pip uninstall --quiet -y -r requirements-remove.txt
	@# The course package itself, editable (its code stays this checkout's): its entry points,
	@# e.g. the book's mime renderer for MyST-NB (pyproject.toml), need its metadata installed.
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e . >$(VENV)/editable.log 2>&1 || \
	  { cat $(VENV)/editable.log; exit 1; }
	rm -rf build
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (ANDREA Block Lab)" >/dev/null
	@# Kernels start in each notebook's own folder: make andrea_ref importable from anywhere.
	$(PY) -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], 'andrea_block_lab.pth').write_text('$(CURDIR)\n')"
	touch $@

venv: $(STAMP)

# The ngshare exchange service's own environment (deploy/image/requirements-ngshare.txt: it
# needs SQLAlchemy 1.x, the course SQLAlchemy 2), for tests/test_deploy_exchange.py.
NGSHARE_VENV := .venv-ngshare
NGSHARE_STAMP := $(NGSHARE_VENV)/.installed
$(NGSHARE_STAMP): deploy/image/requirements-ngshare.txt
	$(PYTHON) -m venv $(NGSHARE_VENV)
	$(NGSHARE_VENV)/bin/python -m pip install --quiet $(PIP_INDEX_OPTS) -r $<
	touch $@

# Debian packages: Chromium for the browser tests; bubblewrap, prlimit and setpriv
# (util-linux) and libseccomp2 for the grading sandbox; PostgreSQL for the gradebook test;
# runc and tini for the emulated grading pod (tests/test_deploy_grading_pod.py).
sysdeps:
	@{ command -v chromium && command -v bwrap && command -v prlimit && command -v setpriv && \
	   command -v runc && command -v tini && \
	   { command -v initdb || ls /usr/lib/postgresql/*/bin/initdb; } && \
	   $(PYTHON) -c "import ctypes.util, sys; sys.exit(not ctypes.util.find_library('seccomp'))"; } >/dev/null 2>&1 || { \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO apt-get install -y -qq chromium bubblewrap util-linux postgresql libseccomp2 runc tini >/dev/null; }

# Regenerate exercises/ from solutions/ (records the assignments in gradebook.db). Refuses
# to overwrite notebooks edited in exercises/ since the last release; FORCE=1 overwrites them.
release: $(STAMP)
	$(PY) scripts/release.py $(if $(filter 1 yes true,$(FORCE)),--force)

# Instructor edition: the book plus every solution executed, in _build_instructor/_build/html.
instructor: $(STAMP)
	$(PY) -m classroom.instructor_book

# Grade a class: make grade SUBMISSIONS=folder-or-zip [WORKERS=n] [DB=url]
grade: $(STAMP) sysdeps mathdeps
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-or-zip [WORKERS=n] [DB=url]" >&2; exit 2; }
	$(PY) -m classroom.grade "$(SUBMISSIONS)" $(if $(WORKERS),--workers $(WORKERS)) $(if $(DB),--db "$(DB)")

# A demo class (right, wrong, untouched, missing and hostile submissions) written into
# _build/demo/ (or OUT=folder), graded by `python -m classroom.grade`; prints what to open
# (classroom/demo.py).
demo: $(STAMP) sysdeps mathdeps
	$(PY) -m classroom.demo $(if $(WORKERS),--workers $(WORKERS)) $(if $(OUT),--out "$(OUT)")

# MathJax for Node (the book's version), with which the grader typesets the math of feedback
# pages as it writes them (classroom/reporting/mathsvg.py): once, into book/_vendor/node.
mathdeps: $(STAMP) bookdeps
	$(PY) -c "from classroom.reporting import mathsvg; mathsvg.vendor()"

# Debian packages the book needs: Graphviz (dot) draws its diagrams, npm vendors MathJax
# and the Georgian web font once.
bookdeps:
	@missing=""; command -v dot >/dev/null 2>&1 || missing="$$missing graphviz"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing >/dev/null; fi

book: $(STAMP) bookdeps
	$(PY) scripts/build_book.py

# Test modules that leave a core idle most of the time (one browser, pip, nbgrader's command
# line, a compiler, or a grading run of a few submissions at a time): after the rest, they run
# two at a time, one module per pytest-xdist worker, the longest first (CONTRIBUTING.md,
# "Tests"). Every other module runs alone.
SIDE_BY_SIDE := tests/test_learner_kit.py tests/test_lab_browser.py tests/test_classroom_instructor.py \
  tests/test_learner_ergonomics.py tests/test_classroom_writable.py tests/test_course_manifest.py \
  tests/test_kernel_loader.py tests/test_deploy_grading_pod.py tests/test_feedback_trap.py \
  tests/test_classroom_hermetic.py tests/test_grading_integrity.py tests/test_feedback_browser.py \
  tests/test_kernel_cpu_twin.py tests/test_deploy_exchange.py tests/test_hub_feedback_browser.py \
  tests/test_kernel_nvcc.py tests/test_classroom_independent.py tests/test_deploy_formgrader.py

# pytest over modules two at a time, one module per pytest-xdist worker (a module's fixtures
# are built once), each process keeping PyTorch to one thread, as the grader's sandboxes do:
# two thread pools as wide as the machine on its two cores slow each other down many times over.
TWO_AT_A_TIME = OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist loadfile

test: $(STAMP) $(NGSHARE_STAMP) sysdeps book
	@# both parts run even when the first fails; make test fails if either did
	@status=0; \
	  (set -x; $(PY) -m pytest $(addprefix --ignore=,$(SIDE_BY_SIDE))) || status=$$?; \
	  (set -x; $(TWO_AT_A_TIME) --no-loadscope-reorder $(SIDE_BY_SIDE)) || status=$$?; \
	  exit $$status

# The contributor's loop: the modules marked `fast` (pytest.ini), without their slow tests,
# two at a time (none uses a session class).
test-fast: $(STAMP)
	$(TWO_AT_A_TIME) -m "fast and not slow"

# Translators: extract the English text and merge it into every catalog (README,
# "Translating the course"); new and changed messages then wait for a translation.
catalogs: $(STAMP) bookdeps
	$(PY) scripts/catalogs.py

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The learner's JupyterLab: a workspace of the released notebooks only (_build/lab-workspace,
# refreshed from exercises/ without overwriting a learner's edits), nbgrader's instructor
# tools off, the Assignment List on the exchange _build/exchange (lab/learner/).
lab: $(STAMP)
	$(PY) scripts/lab.py

# The instructor's JupyterLab: the repository root, every nbgrader tool (lab/instructor/).
lab-instructor: $(STAMP)
	$(PY) scripts/lab.py --instructor

# The learner's kit in _build/learner-kit/ and _build/andrea-block-lab-learner-kit.zip:
# released notebooks, the course package (wheel and sdist), the built book, a README.
learner-kit: $(STAMP) book
	$(PY) scripts/learner_kit.py

# The CUDA kernel built, linked and loaded against a CUDA build of torch, without a GPU, and
# the loader proven on the oldest torch it supports (cuda/README.md). Two environments of
# their own, each rebuilt when its requirements change: .venv-cuda (a CUDA torch whose CUDA
# major is nvcc's: cuda/requirements-cudaNN.txt) and .venv-torch-oldest. `make test` never
# downloads a CUDA torch; this target does (several GB the first time), and only with nvcc.
NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
NVCC_MAJOR := $(if $(NVCC),$(shell "$(NVCC)" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p'))
# The toolkit's folder as nvcc itself reports it (an nvcc on PATH may be a wrapper script)
NVCC_HOME = $(if $(NVCC),$(abspath $(shell "$(NVCC)" --dryrun -E -x cu /dev/null 2>&1 | sed -n 's/^\#\$$ TOP=//p')))
CUDA_VENV := .venv-cuda
CUDA_REQ := cuda/requirements-cuda$(NVCC_MAJOR).txt
OLD_VENV := .venv-torch-oldest
OLD_REQ := cuda/requirements-torch-oldest.txt

CUDA_STAMP := $(CUDA_VENV)/.installed-cuda$(NVCC_MAJOR)
OLD_STAMP := $(OLD_VENV)/.installed
# pip's notes about local indexes without the package are noise here
PIP_QUIET := 2>&1 | { grep -v "^WARNING: Location" || true; }

# --no-compile: the tests import a small part of these torches, compiled as they import it;
# compiling all of it took a quarter of the install's CPU time.
$(CUDA_STAMP): $(CUDA_REQ)
	rm -f $(CUDA_VENV)/.installed-cuda*
	$(PYTHON) -m venv $(CUDA_VENV)
	set -o pipefail; $(CUDA_VENV)/bin/python -m pip install --quiet --no-compile -r $< $(PIP_QUIET)
	touch $@

$(OLD_STAMP): $(OLD_REQ)
	$(PYTHON) -m venv $(OLD_VENV)
	set -o pipefail; $(OLD_VENV)/bin/python -m pip install --quiet --no-compile -r $< $(PIP_QUIET)
	touch $@

test-cuda-build:
ifeq ($(NVCC),)
	@echo "make test-cuda-build: skipped: no nvcc (neither on PATH nor /usr/local/cuda/bin/nvcc)"
else ifeq ($(wildcard $(CUDA_REQ)),)
	@echo "make test-cuda-build: skipped: $(NVCC) is CUDA $(NVCC_MAJOR) and no CUDA $(NVCC_MAJOR) build of torch is known (add $(CUDA_REQ))"
else
	@$(MAKE) --no-print-directory $(CUDA_STAMP) $(OLD_STAMP)
	CUDA_HOME="$(NVCC_HOME)" $(CUDA_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_cuda_build.py
	@# The oldest supported torch: the self-check (loader, CPU twin, autograd functions), the
	@# loader and twin tests, and the CUDA binding's syntax against that torch's headers.
	set -o pipefail; $(OLD_VENV)/bin/python -m andrea_ref.kernels.selfcheck --quick --no-bench | grep -v "  ok$$"
	$(OLD_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_kernel_loader.py tests/test_kernel_cpu_twin.py \
	  tests/test_kernel_nvcc.py::test_cuda_binding_compiles_against_torch_headers
endif

# On a CUDA machine: build the kernel, check it against torch and benchmark it. The
# figures are recorded in cuda/results/ (commit them; the book's kernel chapter shows them).
selfcheck: $(STAMP)
	mkdir -p cuda/results
	$(PY) -m andrea_ref.kernels.selfcheck --require-gpu --json cuda/results/selfcheck-$$(date +%Y-%m-%d).json

# The course on a JupyterHub for a class (README, "Running the course on a JupyterHub"):
# an environment of its own, .venv-hub (the course's requirements, JupyterHub, and the
# course package installed, so that learners' servers need nothing from this repository),
# rebuilt when its requirements change; configurable-http-proxy from npm in hub/node_modules.
HUB_VENV := .venv-hub
HUB_PY := $(HUB_VENV)/bin/python
HUB_REQ_STAMP := $(HUB_VENV)/.requirements
HUB_STAMP := $(HUB_VENV)/.installed
HUB_PROXY := hub/node_modules/.bin/configurable-http-proxy
INSTRUCTOR ?= instructor
# Each person's server runs as their own OS user, so the interpreter must be one every user
# may run: the system's Python 3.11 (python3 and python3-venv), not one under root's home.
HUB_PYTHON ?= /usr/bin/python3
# whether HUB_PYTHON can make a virtual environment (Debian: python3-venv)
HUB_CAN_VENV = $(HUB_PYTHON) -c "import venv, ensurepip" >/dev/null 2>&1

# Two steps: the requirements (most of the time), then the course package, which is built
# in this checkout (its build/ and egg-info), so never beside another build of it.
$(HUB_REQ_STAMP): requirements.txt requirements-runtime.txt requirements-nodeps.txt requirements-remove.txt hub/requirements.txt
	@$(HUB_CAN_VENV) || { \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq python3 python3-venv >/dev/null; }
	$(HUB_PYTHON) -m venv $(HUB_VENV)
	set -o pipefail; $(HUB_PY) -m pip install --quiet $(PIP_INDEX_OPTS) -r requirements.txt -r hub/requirements.txt $(PIP_QUIET)
	set -o pipefail; $(HUB_PY) -m pip install --quiet $(PIP_INDEX_OPTS) --no-deps -r requirements-nodeps.txt $(PIP_QUIET)
	set -o pipefail; $(HUB_PY) -m pip uninstall --quiet -y -r requirements-remove.txt $(PIP_QUIET)
	touch $@

$(HUB_STAMP): $(HUB_REQ_STAMP) pyproject.toml setup.py
	set -o pipefail; $(HUB_PY) -m pip install --quiet $(PIP_INDEX_OPTS) --no-deps --force-reinstall . $(PIP_QUIET)
	rm -rf build
	touch $@

$(HUB_PROXY): hub/package.json
	npm install --prefix hub --no-package-lock --no-audit --no-fund --silent
	touch $@

hubdeps: $(HUB_STAMP) $(HUB_PROXY) sysdeps bookdeps

# Run as root. INSTRUCTOR (default: instructor) is an existing OS user; learners log in
# with their OS accounts (PAM) once added on the hub's admin page or in ANDREA_HUB_LEARNERS.
hub: hubdeps book
	$(HUB_PY) scripts/hub.py setup
	$(HUB_PY) scripts/hub.py course $(INSTRUCTOR)
	ANDREA_HUB_INSTRUCTORS=$${ANDREA_HUB_INSTRUCTORS:-$(INSTRUCTOR)} $(HUB_PY) scripts/hub.py run

test-class: hubdeps book
	$(HUB_PY) -m pytest -p no:cacheprovider tests/test_class_hub.py

# The environments of test-class and test-cuda-build, the slow part of both, without their
# tests, system packages or the course package (built in this checkout, so not beside `make
# test`). CI makes them beside `make test`, at the lowest priority (.ci/run); what is missing
# after, those targets make.
test-envs:
	@if $(HUB_CAN_VENV); then $(MAKE) --no-print-directory $(HUB_REQ_STAMP); \
	  else echo "make test-envs: $(HUB_PYTHON) has no venv module (python3-venv): make test-class installs it"; fi
ifneq ($(and $(NVCC),$(wildcard $(CUDA_REQ))),)
	@$(MAKE) --no-print-directory $(CUDA_STAMP) $(OLD_STAMP)
endif

clean:
	rm -rf _build _build_instructor .pytest_cache
