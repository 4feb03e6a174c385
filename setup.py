"""Only the package list, which pyproject.toml cannot express: every ``judge_eval`` package found on
disk plus ``judge_eval.prompts``, which ``[tool.setuptools.package-dir]`` maps to the top-level
``prompts/`` folder. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["judge_eval", "judge_eval.*"]), "judge_eval.prompts"])
