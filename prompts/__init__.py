"""The prompt templates of judge-eval, installed as the package ``judge_eval.prompts``.

One file per version, ``<name>.v<version>.md``; :mod:`judge_eval.judge.prompts` loads, renders and
selects them. This folder sits beside ``judge_eval/`` in the repository so prompts are reviewed as
what they are (text, not code); ``pyproject.toml`` maps it into the package (``package-dir``).
"""
