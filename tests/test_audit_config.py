"""The audit config: every mistake is exit 2 with the key named, before anything is run, paid
for or written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from judge_eval.audit import load_config
from judge_eval.audit.config import metric_names
from judge_eval.cli import main
from judge_eval.errors import ConfigError, ExitCode

from judge_helpers import MINI

GOOD = f'''
[dataset]
data = "{MINI / 'questions.jsonl'}"
corpus = "{MINI / 'corpus.jsonl'}"

[runs.dense]
file = "{MINI / 'runs' / 'dense.trec'}"

[judge]
name = "offline"

[metrics]
ks = [5, 10]
check = ["context_recall@10", "judge_ndcg@10"]

[thresholds]
default_max_drop = 0.02
[thresholds.floor]
"context_recall@10" = 0.4
[thresholds.max_drop]
"judge_ndcg@10" = 0.05
'''


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "audit.toml"
    p.write_text(text)
    return p


def test_a_good_config_loads_with_its_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.runs["dense"].file == MINI / "runs" / "dense.trec" and cfg.runs["dense"].command is None
    assert cfg.ks == [5, 10] and cfg.check == ["context_recall@10", "judge_ndcg@10"]
    assert cfg.floors == {"context_recall@10": 0.4}
    assert cfg.max_drops == {"context_recall@10": 0.02, "judge_ndcg@10": 0.05}
    assert (cfg.baseline_mode, cfg.alpha, cfg.n_perm, cfg.seed) == ("previous", 0.05, 10000, 0)
    assert cfg.history == tmp_path / "audit-history.sqlite" and cfg.output_dir == tmp_path / "audits"
    assert cfg.cache_mode == "use" and cfg.max_errors == "5%" and cfg.canary is None
    # the hash is of the parsed config: comments and layout do not change it, a value does
    assert load_config(write(tmp_path, "# a comment\n" + GOOD)).hash == cfg.hash
    assert load_config(write(tmp_path, GOOD.replace("0.05", "0.06"))).hash != cfg.hash


def test_metric_names_follow_the_cutoffs() -> None:
    names = metric_names([5, 10], human=False)
    assert "context_recall@5" in names and "judge_mrr@10" in names and "judge_mrr@5" not in names
    assert "recall@10" not in names and "recall@10" in metric_names([5, 10], human=True)


BAD = [
    # (replace this, with this, the key the message names, words in it)
    ('[dataset]\n', '[dataset]\nfoo = 1\n', "dataset.foo", "unknown key"),
    (f'data = "{MINI / "questions.jsonl"}"', 'data = "nope.jsonl"', "dataset.data", "file not found"),
    (f'file = "{MINI / "runs" / "dense.trec"}"', 'file = "nope.trec"', "runs.dense.file", "file not found"),
    ('[runs.dense]\n', '[runs.dense]\ntimeout = 5\n', "runs.dense.timeout", "only applies to a run with a command"),
    ('[runs.dense]\n', '[runs."a b"]\nfile = "x"\n[runs.dense]\n', 'runs."a b"', "a run name"),
    ('name = "offline"', 'name = "nope"', "judge.name", "unknown judge"),
    ('name = "offline"', 'name = "offline"\nconcurrency = 0', "judge.concurrency", "integer >= 1"),
    ('name = "offline"', 'name = "offline"\nmax_errors = "lots"', "judge.max_errors", "neither a share"),
    ('name = "offline"', 'name = "offline"\nprompts = ["judge_chunk@99"]', "judge.prompts", "judge_chunk"),
    ('name = "offline"', 'name = "offline"\ntimeout = 0', "judge.timeout", "> 0"),
    ('ks = [5, 10]', 'ks = [0]', "metrics.ks", "integers >= 1"),
    ('check = ["context_recall@10", "judge_ndcg@10"]', 'check = ["context_recall@20"]', "metrics.check",
     "unknown metric 'context_recall@20'"),
    ('check = ["context_recall@10", "judge_ndcg@10"]', 'check = ["recall@10"]', "metrics.check", "needs labels.qrels"),
    ('check = ["context_recall@10", "judge_ndcg@10"]', '', "metrics.check", "missing"),
    ('"context_recall@10" = 0.4', '"context_recal@10" = 0.4', 'thresholds.floor."context_recal@10"',
     "not in metrics.check"),
    ('"judge_ndcg@10" = 0.05', '"judge_ndcg@10" = -0.05', 'thresholds.max_drop."judge_ndcg@10"', ">= 0"),
    ('"judge_ndcg@10" = 0.05', '"judge_ndcg@10" = "a lot"', 'thresholds.max_drop."judge_ndcg@10"', "finite number"),
    ('default_max_drop = 0.02', 'default_max_drop = 0.02\nmax_drops = 1', "thresholds.max_drops", "unknown key"),
    ('[thresholds]', '[baseline]\nmode = "pinned"\n[thresholds]', "baseline.id", "needs the audit id"),
    ('[thresholds]', '[baseline]\nmode = "newest"\n[thresholds]', "baseline.mode", "previous, pinned, median"),
    ('[thresholds]', '[baseline]\nlast = 3\n[thresholds]', "baseline.last", "only applies with mode = \"median\""),
    ('[thresholds]', '[gate]\nalpha = 1\n[thresholds]', "gate.alpha", "< 1"),
    ('[thresholds]', '[gate]\nn_perm = 0\n[thresholds]', "gate.n_perm", "integer >= 1"),
    ('[thresholds]', '[cache]\nmode = "sometimes"\n[thresholds]', "cache.mode", "use, refresh, replay, off"),
    ('[thresholds]', '[budget]\nmax_cost = -1\n[thresholds]', "budget.max_cost", ">= 0"),
    ('[thresholds]', '[canary]\nfloor = 0.5\n[thresholds]', "canary.pairs", "missing"),
    ('[thresholds]', '[canary]\npairs = "nope.jsonl"\n[thresholds]', "canary.pairs", "file not found"),
    ('[thresholds]', '[history]\ntimeout = "long"\n[thresholds]', "history.timeout", "finite number"),
    ('[thresholds]', '[labels]\nqrels = "nope.txt"\n[thresholds]', "labels.qrels", "file not found"),
    ('[dataset]\n', 'colour = 1\n[dataset]\n', "colour", "unknown key"),
]


@pytest.mark.parametrize("old, new, key, words", BAD, ids=[b[2] + ":" + b[3][:20] for b in BAD])
def test_a_bad_config_names_the_key(old: str, new: str, key: str, words: str, tmp_path: Path) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert err.value.option == key, str(err.value)
    assert words in str(err.value)


def test_a_bad_config_on_the_command_line_is_exit_2_and_nothing_is_written(tmp_path: Path) -> None:
    config = write(tmp_path, GOOD.replace("ks = [5, 10]", "ks = [5, 10, true]"))
    before = sorted(p.name for p in tmp_path.iterdir())
    result = CliRunner().invoke(main, ["audit", "--config", str(config)], catch_exceptions=False)
    assert result.exit_code == ExitCode.USAGE
    assert result.output.startswith("error: metrics.ks: must be a non-empty list of integers >= 1")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no history, no audit folder


@pytest.mark.parametrize("text, words", [
    ("[dataset\n", "is not valid TOML"),
    (None, "config file not found"),
])
def test_unreadable_config_files(text: str | None, words: str, tmp_path: Path) -> None:
    path = tmp_path / "audit.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.option == "--config" and words in str(err.value)


def test_bad_input_found_after_the_config_writes_nothing_either(tmp_path: Path) -> None:
    """A data file that is not what it claims (found while loading, after the config check):
    exit 2 naming the file and line; no history file and no audit folder."""
    bad = tmp_path / "questions.jsonl"
    bad.write_text('{"id": "q1", "question": "x", "reference": "y"}\n{not json\n')
    config = write(tmp_path, GOOD.replace(str(MINI / "questions.jsonl"), str(bad)))
    result = CliRunner().invoke(main, ["audit", "--config", str(config)], catch_exceptions=False)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "questions.jsonl" in result.output and "line 2" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.toml", "questions.jsonl"]


def test_a_pinned_baseline_that_does_not_exist_is_exit_2_naming_the_key(tmp_path: Path) -> None:
    config = write(tmp_path, GOOD + '\n[baseline]\nmode = "pinned"\nid = "20990101T000000Z-abcdef"\n')
    result = CliRunner().invoke(main, ["audit", "--config", str(config)], catch_exceptions=False)
    assert result.exit_code == ExitCode.USAGE
    assert result.output.startswith("error: baseline.id: no audit '20990101T000000Z-abcdef'")
