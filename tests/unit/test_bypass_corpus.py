"""The bypass corpus (issue 43, item 3): every hostile input found so far, refused by its rule.

* ``tests/bypass_corpus.py`` holds the table: one row per bypass, with the rule that refuses it and
  the refusal reason, and controls the rules must accept; one parametrized test runs it, in memory;
* generated connector configs (references to providers of every spelling, paths in and out of the
  allowed prefix, escapes, line terminators, look-alike characters, nesting, fragments) against a
  model of what Connect resolves, written here with Python's backtracking ``re`` (Java's
  leftmost, lazy-first semantics for Kafka's pattern) and the allow-list rule written out plainly,
  independent of ``models.config_references`` and ``clients.reference_policy``: the policy refuses
  a config exactly when the model finds a reference the tenant may not use, and names its key.

The model's pattern is Kafka's ``ConfigTransformer.DEFAULT_PATTERN`` as shipped since before 3.6,
``\\$\\{([^}]*?):(([^}]*?):)?([^}]*?)\\}``: a negated class, so a reference holds no ``}`` but
may span ``\\n`` and ``\\u2028`` (an earlier Kafka pattern used ``.``, which stops at Java's line
terminators; ``tests/integration/test_config_transformer.py`` reads the pattern from the jars).
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from typing import Final

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from connect_offsets.clients.credentials import CredentialsPolicy, CredentialsRefused
from connect_offsets.clients.reference_policy import ReferenceRule
from tests.bypass_corpus import ANY, CORPUS, NAMESPACE, SECRETS_UNDER_NAMESPACE, Bypass, reason_of

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("row", [pytest.param(row, id=row.name) for row in CORPUS])
async def test_the_rule_refuses_the_bypass(row: Bypass) -> None:
    try:
        result = row.attempt()
        if inspect.isawaitable(result):
            result = await result
    except AssertionError:
        raise
    except Exception as error:
        got, message = reason_of(error), str(error)
    else:
        got, message = None, ""
    assert got == row.reason, f"{row.rule}: expected {row.reason or 'accepted'}, got {got or 'accepted'}: {message}"
    if row.reason is None:
        if row.returns is not ANY:
            assert result == row.returns
    else:
        assert row.says in message, message


def test_the_corpus_names_each_row_once_and_covers_every_rule() -> None:
    names = Counter(row.name for row in CORPUS)
    assert [name for name, count in names.items() if count > 1] == []
    families = Counter(row.family for row in CORPUS)
    assert set(families) == {
        "references",
        "override-keys",
        "mirror-keys",
        "urls",
        "regex",
        "gzip",
        "owner-records",
        "inputs",
        "secrets",
        "binding",
    }
    assert families["references"] >= 30
    # Every rule has bypasses it refuses and controls it accepts.
    for family in families:
        reasons = {row.reason for row in CORPUS if row.family == family}
        assert None in reasons and len(reasons) > 1, family


# --- generated connector configs against a model of what Connect resolves --------------------------

#: Kafka's ConfigTransformer.DEFAULT_PATTERN. ``[^}]`` means the same in Java and in ``re`` (line
#: terminators included); both engines backtrack, leftmost first, lazy groups shortest first.
CONNECT_PATTERN: Final = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


def resolved(value: str) -> list[tuple[str, str, str]]:
    """(provider, path, text) of every reference Connect resolves in ``value``: ``Matcher.find`` in
    a loop, each search from the end of the last match; no path is Kafka's empty path."""
    return [
        (m.group(1), m.group(3) if m.group(3) is not None else "", m.group(0)) for m in CONNECT_PATTERN.finditer(value)
    ]


def tenant_may_use(provider: str, path: str) -> bool:
    """The rule under test, written out: ``secrets`` under ``team-a/``, no ``.``/``..`` segment,
    no backslash; anything else is forbidden."""
    return (
        provider == "secrets"
        and path.startswith("team-a/")
        and "\\" not in path
        and not any(segment in (".", "..") for segment in path.split("/"))
    )


def first_forbidden(config: dict[str, str]) -> tuple[str, str] | None:
    """(key, reference text) of the first reference the tenant may not use, keys in sorted order."""
    for key in sorted(config):
        for provider, path, text in resolved(config[key]):
            if not tenant_may_use(provider, path):
                return key, text
    return None


PROVIDERS: Final = ["secrets", "file", "env", "nope", "Secrets", " secrets"]
PATHS: Final = [
    "team-a/db",
    "team-a/",
    "team-b/db",
    "team-a/../team-b/db",
    "team-a/./db",
    "team-ab/db",
    "team-a\\..\\db",
    "team-a",
    "/etc/kafka/worker.properties",
    "",
]
KEYS: Final = ["pw", "x", "a:b", ""]
FRAGMENTS: Final = [
    "$$",
    "\\$",
    "$",
    "${",
    "{",
    "}",
    ":",
    " ",
    "\t",
    "\n",
    "\r",
    "\u0085",
    "\u2028",
    "\u2029",
    "\uff04",
    "\uff5b",
    "\uff5d",
    "\uff1a",
    "price ",
    "team-a/",
    "secrets",
    "..",
]

references = st.builds(
    lambda provider, path, key, with_path: f"${{{provider}:{path}:{key}}}" if with_path else f"${{{provider}:{key}}}",
    st.sampled_from(PROVIDERS),
    st.sampled_from(PATHS),
    st.sampled_from(KEYS),
    st.booleans(),
)
#: References that leave the prefix once a file system or provider normalises the path.
escaping_references = st.builds(
    lambda tail, key: f"${{secrets:team-a/{tail}:{key}}}",
    st.sampled_from(["../team-b/db", "./db", "db/..", "..", ".", "db\\x", "x/../../team-b/db", "db/./"]),
    st.sampled_from(KEYS),
)
#: The allowed reference under another spelling of the provider's name: another provider.
misspelled_references = st.builds(
    lambda provider: f"${{{provider}:team-a/db:pw}}",
    st.sampled_from(["Secrets", " secrets", "secrets ", "SECRETS", "\tsecrets", "secrets\n", "\uff53ecrets"]),
)
#: References the tenant may use (names with dots that are not segments, nested directories), so
#: that accepted configs with references are generated as often as refused ones.
allowed_references = st.builds(
    lambda name, key: f"${{secrets:team-a/{name}:{key}}}",
    st.sampled_from(["db", "db/x", "..db", "db..", ".db", "a.b", "db/", "db$", "db{x"]),
    st.sampled_from(KEYS),
)
look_alikes = references.map(lambda ref: ref.replace("$", "\uff04").replace("{", "\uff5b")) | references.map(
    lambda ref: ref.replace(":", "\uff1a", 1)
)
nested = st.builds(
    lambda provider, inner, key: f"${{{provider}:{inner}:{key}}}",
    st.sampled_from(PROVIDERS),
    references,
    st.sampled_from(KEYS),
)
pieces = st.one_of(
    references,
    allowed_references,
    allowed_references,
    allowed_references,
    escaping_references | misspelled_references,
    nested,
    look_alikes,
    st.sampled_from(FRAGMENTS),
    st.text(alphabet="${}:/.\\ab-\n\u2028", max_size=6),
)
#: What a well-meaning tenant writes: its own Secrets among text (a fragment may still join a
#: neighbour into a reference the model reads).
tenant_pieces = allowed_references | st.sampled_from(["price ", " ", "x", "\n", "\uff04\uff5b", "}", ":", "$"])
#: At most 60 characters: ``re`` backtracks over three lazy groups, polynomially in the length.
values = (st.lists(pieces, max_size=4) | st.lists(tenant_pieces, max_size=4)).map(lambda parts: "".join(parts)[:60])
#: Keys no other part of the connector config check looks at (no override, no bootstrap.servers).
connector_configs = st.dictionaries(
    st.sampled_from(["topic", "database.password", "transforms.mask.replacement", "label"]),
    values,
    min_size=1,
    max_size=4,
)

#: The rule under test: ``secrets`` under ``{namespace}/`` for team-a.
RULE: Final = ReferenceRule.for_namespace(NAMESPACE, SECRETS_UNDER_NAMESPACE, None, "ConnectCluster platform/shared")


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(connector_configs)
@example({"p": "${nope:x}${secrets:other-ns/db:password}"})
@example({"p": "${nope:x:y}${secrets:other-ns/db:password}"})
@example({"p": "${secrets:team-a/x}${secrets:other/db:pw}"})  # one reference: team-a's path swallows the rest
@example({"p": "$${secrets:other/db:pw}", "topic": "${secrets:team-a/db:pw}"})
@example({"p": "\uff04\uff5bsecrets:other/db:pw\uff5d", "q": "${secrets:a\u2028b:c}"})
@example({"a": "${secrets:other/db", "b": ":pw}"})
def test_the_policy_refuses_exactly_what_connect_would_resolve_for_another(config: dict[str, str]) -> None:
    forbidden = first_forbidden(config)
    try:
        CredentialsPolicy().check_connector_config(
            config, field="spec.config", tenant_keys=config, mirror=False, references=RULE
        )
    except CredentialsRefused as error:
        assert error.reason == "ConfigProviderReference", str(error)
        assert forbidden is not None, f"refused, but Connect resolves nothing forbidden in {config!r}: {error}"
        key, text = forbidden
        # The refusal names the first key, and quotes the first reference, that the model forbids.
        assert f"spec.config ({key}): refers to config provider" in str(error), (forbidden, str(error))
        assert f"({text[:200]})" in str(error), (forbidden, str(error))
    else:
        assert forbidden is None, f"accepted, but Connect resolves {forbidden[1]!r} in {forbidden[0]}"
