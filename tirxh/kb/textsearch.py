"""The one matching rule of ``tirxh zoo search`` and ``tirxh ptx search``.

A query is whitespace-separated terms; a record matches when every term is a case-insensitive
substring of a value in one of its fields. A term scores the weight of the best field it matched
(a name says more than a word in a docstring), and a record's score is the sum over its terms.
"""

from __future__ import annotations

from ..core.errors import UsageError


def terms_of(query: str, command: str) -> list:
    terms = [t.lower() for t in query.split()]
    if not terms:
        raise UsageError(f"{command}: the query is empty")
    return terms


def match(terms: list, fields: dict, weights: dict, prose=()) -> "tuple[int, dict] | None":
    """``(score, matched)`` when every term matches, else None. `fields` maps a field name to
    its string values; `matched` maps a field to the values that matched, or for the `prose`
    fields (whole docstrings) to the terms found in them."""
    score, matched = 0, {}
    for term in terms:
        best = 0
        for fname, values in fields.items():
            got = [v for v in dict.fromkeys(values) if v and term in v.lower()]
            if not got:
                continue
            best = max(best, weights[fname])
            seen = matched.setdefault(fname, [])
            seen += [x for x in ([term] if fname in prose else got) if x not in seen]
        if not best:
            return None
        score += best
    return score, matched
