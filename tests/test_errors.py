"""The bad-input tables together: ``test_errors_<module>.py`` holds the rows of one public
module (their helpers are in ``bad_inputs``); every public function has a row in one of them."""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re

from bad_inputs import public

import jaxpool
from jaxpool import openvino as jov

TABLES = sorted(p.stem for p in pathlib.Path(__file__).parent.glob("test_errors_*.py"))


def test_tables_are_unique_and_cover_every_public_function():
    rows = [r for table in TABLES for r in importlib.import_module(table).ROWS]
    ids = [r.id for r in rows]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    covered = {public(r.values[0]) for r in rows}
    functions = [getattr(jaxpool, name) for name in jaxpool.__all__]
    every = {public(fn) for fn in functions if inspect.isfunction(fn)} | {public(jov.layer)}
    ops = (jaxpool.max_pool, jaxpool.avg_pool, jaxpool.adaptive_max_pool, jaxpool.max_unpool)
    assert {public(fn) for fn in ops} <= every
    missing = {fn.__name__ for fn in every if fn not in covered}
    assert not missing, f"public functions without a row: {sorted(missing)}"
    for r in rows:
        assert r.values[3] in (ValueError, TypeError), r.id
        re.compile(r.values[4])
