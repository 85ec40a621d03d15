# The Python package (python/) and its tests (tests/python/), included by the
# Makefile.
#
#   make check-python   pytest against a real daemon of this build (part of
#                       check-host); tests marked cuda skip without a GPU
#   make python-errors  rewrite python/rdmamem/_errtable.py from proto/errors.c
#   make python-api     rewrite docs/python-api.md from the package's docstrings
#                       (check-python fails when it is out of date)
#
# Debian's interpreter, whose packages these are (a python3 earlier on PATH,
# pyenv's say, lacks them); PYTHON= picks another.
# python3-venv and python3-wheel: the fresh-venv test (test_readme.py) builds
# the package offline with --no-build-isolation, and setuptools 66 needs wheel
# for that (the venv's own pip and setuptools come from python3-venv).
# python3-prometheus-client: test_metrics.py parses the metrics text with it.
DEB_PKGS += python3-pytest python3-numpy python3-torch python3-setuptools python3-venv \
            python3-wheel python3-prometheus-client
PYTHON ?= $(if $(wildcard /usr/bin/python3),/usr/bin/python3,python3)

.PHONY: check-python python-errors python-api

# A sanitizer build's librdmamem cannot be loaded into an uninstrumented
# Python (the runtime must come first), so those runs leave the package out.
check-python: deps all
ifneq ($(filter -fsanitize=%,$(SAN)),)
	@echo "check-python: skipped in the $(VARIANT) build (Python cannot load an instrumented librdmamem)"
else
	RDMAMEM_BUILD=$(abspath $(B)) $(PYTHON) -m pytest -q -rs -p no:cacheprovider tests/python
endif

python-errors:
	$(Q)$(PYTHON) python/tools/gen_errors.py > python/rdmamem/_errtable.py.tmp && \
		mv python/rdmamem/_errtable.py.tmp python/rdmamem/_errtable.py

python-api:
	$(Q)$(PYTHON) python/tools/gen_api.py > docs/python-api.md.tmp && \
		mv docs/python-api.md.tmp docs/python-api.md
