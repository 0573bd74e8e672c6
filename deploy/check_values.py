"""Check Helm values for the Zero to JupyterHub chart the way ``helm install`` does.

    python deploy/check_values.py [VALUES.yaml]     (default: deploy/z2jh/values.yaml)

Helm first merges the user's values over the chart's defaults -- maps merged key by key
and recursively, the user's value winning, a ``null`` deleting the key, anything else
(lists included) replaced whole -- and then validates the result against the chart's
``values.schema.json``. This does the same with the chart's published schema and defaults
(``deploy/z2jh/chart-4.3.1/``) and the ``jsonschema`` library, and prints one line per
problem: the key's path and what the schema expected. Exit status 1 if there is any.
"""
from __future__ import annotations

import copy
import functools
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CHART = HERE / "z2jh" / "chart-4.3.1"
VALUES = HERE / "z2jh" / "values.yaml"


def coalesce(user: dict, defaults: dict) -> dict:
    """Helm's coalescing of ``user`` values over a chart's ``defaults`` (a new dict)."""
    out = copy.deepcopy(defaults)
    for key, value in user.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = coalesce(value, out[key])
        else:  # a scalar or list, or a table over a non-table: the user's value (Helm warns)
            out[key] = _without_nulls(copy.deepcopy(value))
    return out


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


@functools.lru_cache(maxsize=None)
def _chart(chart: Path):
    import jsonschema
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    schema = yaml.load((chart / "values.schema.yaml").read_text(), Loader=loader)
    defaults = yaml.load((chart / "values.yaml").read_text(), Loader=loader)
    return jsonschema.Draft7Validator(schema), defaults


def problems(values: dict, chart: Path = CHART) -> list[str]:
    validator, defaults = _chart(chart)
    merged = coalesce(values, defaults)
    out = []
    for err in sorted(validator.iter_errors(merged), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        out.append(f"{where}: {err.message}")
    return out


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        print("usage: check_values.py [VALUES.yaml]", file=sys.stderr)
        return 2
    path = Path(args[0]) if args else VALUES
    try:
        values = yaml.safe_load(path.read_text())
    except OSError as exc:
        print(f"VALUES: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 2
    except yaml.YAMLError as exc:
        print(f"VALUES: {path} is not YAML: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    if not isinstance(values, dict):
        print(f"VALUES: expected a YAML mapping in {path}, got {type(values).__name__}", file=sys.stderr)
        return 2
    found = problems(values)
    for line in found:
        print(f"{path.name}: {line}")
    if not found:
        print(f"{path.name}: valid for Zero to JupyterHub {CHART.name.split('-', 1)[1]}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
