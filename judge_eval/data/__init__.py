"""Data in: the models and the readers/writers for each input format."""

from judge_eval.data.models import Chunk, Dataset, Qrels, Question, Run, content_id

__all__ = ["Chunk", "Dataset", "Qrels", "Question", "Run", "content_id"]
