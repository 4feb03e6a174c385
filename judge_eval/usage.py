"""Token accounting (the lowest stage: the cache, the judges and the runner all count tokens)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Usage"]


@dataclass
class Usage:
    """Token accounting of one or more calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )
