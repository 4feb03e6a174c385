"""Token accounting (the lowest stage: the cache, the judges and the runner all count tokens)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Usage"]


@dataclass
class Usage:
    """Token accounting of one or more calls.

    ``reasoning_tokens`` are the hidden reasoning tokens of a reasoning model (the server's
    ``usage.completion_tokens_details.reasoning_tokens``). They are billed as completion tokens and
    the server already counts them in ``completion_tokens``, so they are a part of it, never added
    to it again: ``total_tokens`` is prompt + completion.

    ``cached_tokens`` are the prompt tokens the provider served from its prompt cache (OpenAI's
    ``usage.prompt_tokens_details.cached_tokens``, billed at a discount): a part of
    ``prompt_tokens``, like the reasoning tokens of the completion.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cached_tokens + other.cached_tokens,
        )
