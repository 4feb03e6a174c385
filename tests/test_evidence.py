"""The evidence check: a support claim counts only when its quote is in the chunk."""

from __future__ import annotations

import pytest

from judge_eval.judge.evidence import normalize, quote_found, quote_parts, verify
from judge_eval.judge.protocol import ChunkVerdict, Support

CHUNK = (
    "Flex Home Loan (product code HL-FLX-02)\n"
    "The  Flex Home Loan charges an arrangement fee of 2% of the loan amount.\n"
    "Overpayments of up to 10% a year are free; above that, an early repayment charge applies."
)


def verdict(*claims: tuple[int, str], grade: int = 2) -> ChunkVerdict:
    return ChunkVerdict(supports=[Support(statement=s, evidence=e) for s, e in claims], grade=grade)


def test_normalize():
    assert normalize("  Ｆｅｅ\u00a0 IS\t\n2\uff05 ") == "fee is 2%"
    assert normalize("\u201cIt\u2019s\u201d \u2013 ok\u2026") == "\"it's\" - ok..."
    assert normalize("Stra\u00dfe") == "strasse"
    assert normalize("zero\u200bwidth soft\u00adhyphen") == "zerowidth softhyphen"


def test_exact_quote_is_verified():
    v = verify(verdict((1, "an arrangement fee of 2% of the loan amount")), CHUNK, 2)
    assert v.supported == frozenset({0})
    assert v.evidence == {0: "an arrangement fee of 2% of the loan amount"}
    assert v.fuzzy == frozenset()
    assert (v.unverified, v.invalid_statement, v.duplicates) == (0, 0, 0)
    assert v.grade == 2


def test_case_whitespace_and_nfkc_differences_are_verified():
    quotes = [
        "THE FLEX HOME LOAN charges an arrangement fee",  # case
        "The Flex   Home\nLoan charges",  # whitespace (chunk has a double space too)
        "arrangement fee of 2\uff05 of the loan amount",  # full-width percent sign (NFKC)
        "\u201cOverpayments of up to 10% a year are free\u201d",  # surrounding typographic quotes
        "product code HL\u2011FLX\u201102",  # non-breaking hyphens
    ]
    for q in quotes:
        assert quote_found(q, CHUNK) == "exact", q
        assert verify(verdict((1, q)), CHUNK, 1).supported == frozenset({0}), q


def test_fuzzy_near_miss_with_one_typo_is_accepted():
    q = "an arrangment fee of 2% of the loan amount"  # "arrangment": one letter missing
    assert q.casefold() not in normalize(CHUNK)
    v = verify(verdict((2, q)), CHUNK, 2)
    assert v.supported == frozenset({1})
    assert v.fuzzy == frozenset({1})
    assert quote_found(q, CHUNK) == "fuzzy"


def test_fuzzy_threshold_is_respected():
    q = "an arrangment fee of 2% of the loan amount"
    assert verify(verdict((1, q)), CHUNK, 1, fuzzy_threshold=99.5).supported == frozenset()


def test_fuzzy_match_never_changes_a_number():
    # one character different, so the fuzzy score is high, but the number is wrong
    q = "an arrangement fee of 3% of the loan amount"
    assert quote_found(q, CHUNK) is None
    v = verify(verdict((1, q)), CHUNK, 1)
    assert v.supported == frozenset() and v.unverified == 1


def test_invented_quote_is_rejected():
    v = verify(verdict((1, "The Flex Home Loan has no arrangement fee for first-time buyers")), CHUNK, 1)
    assert v.supported == frozenset()
    assert v.unverified == 1
    assert v.rejected[0].cause == "unverified"


def test_short_quote_is_not_fuzzily_accepted():
    # 13 characters, one typo: below the fuzzy minimum length, so it must match exactly
    assert quote_found("fee of 2% of", CHUNK) == "exact"
    assert quote_found("fe of 2% of", CHUNK) is None
    assert verify(verdict((1, "fe of 2% of")), CHUNK, 1).unverified == 1


def test_quote_longer_than_chunk_is_not_accepted_by_partial_alignment():
    chunk = "The fee is 2% of the loan amount."
    q = chunk + " It is waived for first-time buyers and for all customers in Scotland."
    assert quote_found(q, chunk) is None


def test_empty_quotes_are_unverified():
    for q in ["", "   ", "...", "\u2026", "\"\"", "[...]"]:
        assert quote_parts(q) == [], q
        v = verify(verdict((1, q)), CHUNK, 1)
        assert v.supported == frozenset() and v.unverified == 1, q


def test_out_of_range_statement_numbers():
    v = verify(
        verdict((0, "arrangement fee"), (3, "arrangement fee"), (-1, "arrangement fee"), (2, "arrangement fee")),
        CHUNK,
        2,
    )
    assert v.invalid_statement == 3
    assert v.supported == frozenset({1})
    assert [r.statement for r in v.rejected] == [0, 3, -1]
    assert verify(verdict((1, "arrangement fee")), CHUNK, 0).invalid_statement == 1


def test_ellipsis_split_quotes():
    # both parts are in the chunk, in order
    for q in [
        "The Flex Home Loan charges ... 2% of the loan amount",
        "The Flex Home Loan charges\u2026 2% of the loan amount",
        "\"...charges an arrangement fee [...] of the loan amount...\"",
    ]:
        assert quote_parts(q)[0] in normalize(CHUNK), q
        assert quote_found(q, CHUNK) == "exact", q
    # one part invented -> the whole quote fails
    assert quote_found("The Flex Home Loan charges ... nothing at all for overpayments", CHUNK) is None
    # parts out of order -> fails
    assert quote_found("2% of the loan amount ... The Flex Home Loan charges", CHUNK) is None
    assert quote_parts("a ... b. ... ...") == ["a", "b"]


def test_duplicates_and_accounting_invariant():
    vd = verdict(
        (1, "arrangement fee of 2%"),
        (1, "2% of the loan amount"),  # duplicate (verified, statement already supported)
        (2, "invented text that is not there"),  # unverified
        (2, "Overpayments of up to 10% a year are free"),
        (5, "arrangement fee"),  # invalid
        grade=3,
    )
    v = verify(vd, CHUNK, 2)
    assert v.supported == frozenset({0, 1})
    assert v.evidence == {0: "arrangement fee of 2%", 1: "Overpayments of up to 10% a year are free"}
    assert (v.unverified, v.invalid_statement, v.duplicates) == (1, 1, 1)
    assert len(vd.supports) == len(v.supported) + v.unverified + v.invalid_statement + v.duplicates
    assert [r.cause for r in v.rejected] == ["duplicate", "unverified", "invalid_statement"]


def test_grade_kept_and_unsupported_high_grade_flagged():
    v = verify(verdict((1, "made up"), grade=3), CHUNK, 1)
    assert v.grade == 3
    assert v.grade_without_support
    assert v.capped_grade == 1
    ok = verify(verdict((1, "arrangement fee"), grade=3), CHUNK, 1)
    assert not ok.grade_without_support and ok.capped_grade == 3
    low = verify(verdict(grade=1), CHUNK, 1)
    assert not low.grade_without_support and low.capped_grade == 1


def test_negative_n_statements_is_an_error():
    with pytest.raises(ValueError):
        verify(verdict(), CHUNK, -1)
