"""judge-eval: score RAG retrieval with an LLM judge, and check the judge against human labels."""

from judge_eval.data.models import Chunk, Dataset, Qrels, Question, Run, content_id
from judge_eval.errors import ConfigError, InputError, JudgeCallError, JudgeEvalError

__version__ = "0.1.0"

__all__ = [
    "Chunk",
    "ConfigError",
    "Dataset",
    "InputError",
    "JudgeCallError",
    "JudgeEvalError",
    "Qrels",
    "Question",
    "Run",
    "content_id",
]
