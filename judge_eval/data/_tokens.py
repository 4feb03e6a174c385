"""Whitespace-separated text files split into columns of tokens with numpy: the fast half of the
columnar TREC readers (:mod:`judge_eval.data.columns`).

:func:`split_columns` returns the tokens of a file whose every non-blank line has exactly ``n``
tokens, column by column, as numpy byte-string arrays, with each line's number. It splits as
the per-line readers do (a BOM stripped at the start, lines split on ``\\n`` only, tokens split
on ASCII whitespace, which includes ``\\r``, ``\\v``, ``\\f`` and ``\\x1c``-``\\x1f`` as for
``str.split()``), so the tokens are the same. It never raises for bad input: it returns
``None`` whenever the file is anything else (a line with another number of tokens, invalid
UTF-8, a control character such as NUL, a non-ASCII whitespace character, no line at all),
and the caller reads the file again with the per-line reader, which names the file, line and
field of the problem.

The file is processed in blocks of about 4 MB, so the temporary arrays stay small whatever its
size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from judge_eval.data._io import BOM, PathLike, check_file

_BLOCK = 1 << 22
_NEWLINE = 0x0A

#: the bytes of an ordinary line: printable ASCII and the ASCII whitespace ``str.split()``
#: splits on (tab, newline, vertical tab, form feed, carriage return, 0x1c-0x1f, space)
_ORDINARY = bytes(range(0x20, 0x80)) + b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
#: the non-ASCII characters ``str.split()`` splits on, in UTF-8 (NEL, no-break space, ogham,
#: en quad .. hair space, line and paragraph separators, narrow no-break, medium mathematical
#: and ideographic spaces)
_UNICODE_SPACE = re.compile(rb"\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80")


@dataclass(frozen=True)
class Split:
    """``columns[j]``: token ``wanted[j]`` of every line (numpy ``S`` arrays, one entry per
    line); ``lines``: each entry's line number (1-based)."""

    columns: list[np.ndarray]
    lines: np.ndarray


def split_columns(path: PathLike, n_columns: int, wanted: Sequence[int]) -> Split | None:
    """The tokens ``wanted`` (column indices) of ``path``, whose every non-blank line must have
    ``n_columns`` tokens, or ``None`` (see the module docstring)."""
    data = check_file(path).read_bytes()
    begin = len(BOM) if data.startswith(BOM) else 0
    unusual = data[begin:].translate(None, _ORDINARY)
    if unusual:
        if any(byte < 0x20 for byte in set(unusual)):
            return None  # a control character (NUL...) that str.split() keeps in a token
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if _UNICODE_SPACE.search(data, begin):
            return None
    parts: list[Split] = []
    line = 1
    pos = begin
    while pos < len(data):
        cut = data.find(b"\n", min(pos + _BLOCK, len(data)) - 1)
        end = len(data) if cut < 0 else cut + 1
        chars = np.frombuffer(data, dtype=np.uint8, count=end - pos, offset=pos)
        part = _split_block(chars, n_columns, wanted, line)
        if part is None:
            return None
        parts.append(part)
        line += data.count(b"\n", pos, end)
        pos = end
    parts = [p for p in parts if len(p.lines)]
    if not parts:
        return None
    return Split(
        columns=[np.concatenate([p.columns[j] for p in parts]) for j in range(len(wanted))],
        lines=np.concatenate([p.lines for p in parts]),
    )


def _split_block(chars: np.ndarray, n_columns: int, wanted: Sequence[int], first_line: int) -> Split | None:
    space = chars <= 0x20  # only whitespace is left below 0x21 (split_columns checked)
    # Where space and non-space meet: a token starts, then ends, then the next starts...
    edges = np.flatnonzero(space[:-1] != space[1:]) + 1
    if not space[0]:
        edges = np.concatenate([[0], edges])
    if not space[-1]:
        edges = np.concatenate([edges, [len(chars)]])
    starts, ends = edges[0::2], edges[1::2]
    if len(starts) % n_columns:
        return None
    # Entry i is tokens i*n .. i*n+n-1: they must lie on one line, and entry i+1 on a later one.
    newlines = np.flatnonzero(chars == _NEWLINE)
    line_of_first = np.searchsorted(newlines, starts[::n_columns])
    line_of_last = np.searchsorted(newlines, starts[n_columns - 1 :: n_columns])
    if np.any(line_of_first != line_of_last) or np.any(np.diff(line_of_first) <= 0):
        return None
    columns = [_gather(chars, starts[j::n_columns], ends[j::n_columns]) for j in wanted]
    return Split(columns=columns, lines=line_of_first + first_line)


def _gather(chars: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The tokens ``chars[starts[i]:ends[i]]`` as one fixed-width byte-string array (zero bytes
    pad the shorter ones)."""
    if len(starts) == 0:
        return np.zeros(0, dtype="S1")
    lengths = ends - starts
    width = int(lengths.max())
    padded = np.concatenate([chars, np.zeros(width, dtype=np.uint8)])
    matrix = np.lib.stride_tricks.sliding_window_view(padded, width)[starts]
    matrix[np.arange(width) >= lengths[:, None]] = 0
    return matrix.view(f"S{width}").ravel()


# --------------------------------------------------------------------------- token values


_DIGITS = np.zeros(256, dtype=bool)
_DIGITS[np.frombuffer(b"0123456789", dtype=np.uint8)] = True
_DECIMAL = _DIGITS.copy()
_DECIMAL[np.frombuffer(b"+-.eE", dtype=np.uint8)] = True


def _only(tokens: np.ndarray, allowed: np.ndarray) -> bool:
    chars = tokens.view(np.uint8)
    return bool(np.all(allowed[chars] | (chars == 0)))  # 0: the padding after a shorter token


def _chars(tokens: np.ndarray) -> np.ndarray:
    return tokens.view(np.uint8).reshape(len(tokens), tokens.dtype.itemsize)


def _read_digits(chars: np.ndarray, digit: np.ndarray) -> np.ndarray:
    """The number the digits of each row spell, read left to right (other characters skipped;
    more than 18 digits overflow: the caller never uses those rows)."""
    value = np.zeros(len(chars), dtype=np.int64)
    for j in range(chars.shape[1]):
        value = np.where(digit[:, j], value * 10 + (chars[:, j].astype(np.int64) - 0x30), value)
    return value


def integers(tokens: np.ndarray) -> np.ndarray | None:
    """Tokens of plain decimal digits (at most 18) as int64; ``None`` if any token is anything
    else (a sign, an underscore, a dot...: the per-line reader then decides)."""
    if tokens.dtype.itemsize > 18 or not _only(tokens, _DIGITS):
        return None
    chars = _chars(tokens)
    return _read_digits(chars, chars != 0)


def decimals(tokens: np.ndarray) -> np.ndarray | None:
    """Tokens made of digits, signs, ``.``, ``e`` and ``E`` as float64, as ``float()`` parses
    them (numpy's parser rounds correctly, as Python's does); ``None`` if a token has another
    character (``inf``, ``1_000``: the per-line reader then decides) or does not parse."""
    if not _only(tokens, _DECIMAL):
        return None
    try:
        return tokens.astype(np.float64)
    except ValueError:
        return None


def factorize(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, values)``: ``values[codes]`` are the tokens, decoded from UTF-8; ``values``
    are the distinct tokens in order of first appearance (an object array of ``str``).

    Exact and fast: the fixed-width tokens are cut into 8-byte words, and the codes are built
    word by word with pandas' integer hash table (no string is hashed or compared)."""
    import pandas as pd

    n = len(tokens)
    width = tokens.dtype.itemsize
    words = -(-width // 8)
    padded = np.zeros((n, words * 8), dtype=np.uint8)
    padded[:, :width] = tokens.view(np.uint8).reshape(n, width)
    as_words = padded.view(np.uint64)
    codes, _ = pd.factorize(as_words[:, 0])
    for j in range(1, words):
        word_codes, word_values = pd.factorize(as_words[:, j])
        codes, _ = pd.factorize(codes * len(word_values) + word_codes)
    codes = codes.astype(np.int64)
    first = first_positions(codes)
    values = np.array([t.decode("utf-8") for t in tokens[first].tolist()], dtype=object)
    return codes, values


def first_positions(codes: np.ndarray) -> np.ndarray:
    """Where each code first appears, for codes numbered in order of first appearance (as
    ``pandas.factorize`` numbers them): position of 0, of 1, ..."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    highest = np.maximum.accumulate(codes)
    new = np.empty(len(codes), dtype=bool)
    new[0] = True
    new[1:] = highest[1:] > highest[:-1]
    return np.flatnonzero(new)
