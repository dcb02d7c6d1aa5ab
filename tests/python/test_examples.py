"""The digits example reaches >= 95% test accuracy (run inside this job)."""

import importlib.util
import os

from conftest import ROOT


def _load(name):
    path = os.path.join(ROOT, "examples", name)
    spec = importlib.util.spec_from_file_location(name[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_digits_example_accuracy():
    digits = _load("torch_digits.py")
    acc = digits.run(digits.parse_args(["--quiet"]))
    assert acc >= 0.95, acc
