"""spec.version checked against the versions the workers have (issue 49 item 4): Maven's version
order and ranges as Connect applies them, and the refusal's words.

The expected answers below were produced by maven-artifact 3.9.15, the jar Kafka 4.3.1 ships
(``ComparableVersion.compareTo`` over every pair of the versions listed; ``VersionRange
.createFromVersionSpec`` made a hard requirement as ``PluginVersionUtils
.connectorVersionRequirement`` does, then ``containsVersion`` of each version), so the port is
checked against Connect's own rule, not against what we think it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from connect_offsets.planning.plugin_versions import (
    INVALID_REASON,
    NOT_INSTALLED_REASON,
    InvalidVersionSpec,
    check_plugin_versions,
    compare_versions,
    installed_versions,
    version_requirement,
)

pytestmark = pytest.mark.unit

#: Ascending, each group equal in Maven's order (maven-artifact 3.9.15).
MAVEN_ORDER = [
    ["", "0.0"],
    ["none"],
    ["some great version"],
    ["4.3.1-alpha"],
    ["4.3.1-a1"],
    ["4.3.1-beta"],
    ["4.3.1-m1"],
    ["4.3.1-rc1", "4.3.1-RC1", "4.3.1-cr1"],
    ["4.3.1-SNAPSHOT"],
    ["4.3.1", "4.3.1.0", "4.3.1-0", "4.3.1-ga", "4.3.1-final", "4.3.1-release"],
    ["4.3.1-sp"],
    ["4.3.1a"],
    ["4.3.1-foo", "4.3.1.foo"],
    ["4.3.1-1"],
    ["4.3.1.1"],
    ["4.3.2"],
]

VERSIONS = [
    "4.3.1", "4.3", "4.3.1-SNAPSHOT", "4.3.1-rc1", "4.3.1.0", "9.0.1", "10.0", "some great version", "0.0.0",
    "0.0", "", "1.0", "none", "2.0-beta-1", "2.0", "1.0.0.Final", "4.3.1-1", "4.3.1.1", "3.0-SNAPSHOT", "1-sp1",
    "1.0.GA", "4.3.1a", "4.4", "5",
]  # fmt: skip

#: spec.version -> the versions of VERSIONS it contains (maven-artifact 3.9.15, as Connect asks it).
CONTAINS = {
    "[9.0,10.0)": ["9.0.1"],
    "4.3.1": ["4.3.1", "4.3.1.0"],
    "4.3": ["4.3"],
    "[4.3,4.4)": ["4.3.1", "4.3", "4.3.1-SNAPSHOT", "4.3.1-rc1", "4.3.1.0", "4.3.1-1", "4.3.1.1", "4.3.1a"],
    "[4.3.1]": ["4.3.1", "4.3.1.0"],
    "(,4.3.1)": [
        "4.3", "4.3.1-SNAPSHOT", "4.3.1-rc1", "some great version", "0.0.0", "0.0", "", "1.0", "none",
        "2.0-beta-1", "2.0", "1.0.0.Final", "3.0-SNAPSHOT", "1-sp1", "1.0.GA",
    ],
    "[4.0,)": [
        "4.3.1", "4.3", "4.3.1-SNAPSHOT", "4.3.1-rc1", "4.3.1.0", "9.0.1", "10.0", "4.3.1-1", "4.3.1.1", "4.3.1a",
        "4.4", "5",
    ],
    "(4.3.1,)": ["9.0.1", "10.0", "4.3.1-1", "4.3.1.1", "4.3.1a", "4.4", "5"],
    "[1.0,2.0),[4.0,5.0)": [
        "4.3.1", "4.3", "4.3.1-SNAPSHOT", "4.3.1-rc1", "4.3.1.0", "1.0", "2.0-beta-1", "1.0.0.Final", "4.3.1-1",
        "4.3.1.1", "1-sp1", "1.0.GA", "4.3.1a", "4.4",
    ],
    "4.3.1-SNAPSHOT": ["4.3.1-SNAPSHOT"],
    "[4.3.1-rc1,4.3.1]": ["4.3.1", "4.3.1-SNAPSHOT", "4.3.1-rc1", "4.3.1.0"],
    "some great version": ["some great version"],
    "[1.0.0.Final]": ["1.0", "1.0.0.Final", "1.0.GA"],
    "[2.0-alpha,2.0)": ["2.0-beta-1"],
    "v4.3.1": [],
    "[4.3.1-1]": ["4.3.1-1"],
    "(4.3.0,4.3.2)": ["4.3.1", "4.3.1-SNAPSHOT", "4.3.1-rc1", "4.3.1.0", "4.3.1-1", "4.3.1.1", "4.3.1a"],
    "[3.0-SNAPSHOT,3.0)": ["3.0-SNAPSHOT"],
    "[1-SP1,)": [
        "4.3.1", "4.3", "4.3.1-SNAPSHOT", "4.3.1-rc1", "4.3.1.0", "9.0.1", "10.0", "2.0-beta-1", "2.0", "4.3.1-1",
        "4.3.1.1", "3.0-SNAPSHOT", "1-sp1", "4.3.1a", "4.4", "5",
    ],
    "1.0-ga": ["1.0", "1.0.0.Final", "1.0.GA"],
    "0.0": ["0.0.0", "0.0", ""],
}  # fmt: skip

#: Texts Maven refuses, with its message (maven-artifact 3.9.15).
INVALID = {
    "[1.0,2.0": "Unbounded range: [1.0,2.0",
    "(1.0)": "Single version must be surrounded by []: (1.0)",
    "[2.0,1.0]": "Range defies version ordering: [2.0,1.0]",
    "[1.0,1.0)": "Range defies version ordering: [1.0,1.0)",
    "[1.0,2.0),[1.5,3.0)": "Ranges overlap: [1.0,2.0),[1.5,3.0)",
    "[1.0],2.0": "Only fully-qualified sets allowed in multiple set scenario: [1.0],2.0",
}


def test_versions_are_ordered_as_maven_orders_them() -> None:
    position = {v: i for i, group in enumerate(MAVEN_ORDER) for v in group}
    for left, i in position.items():
        for right, j in position.items():
            assert compare_versions(left, right) == (i > j) - (i < j), (left, right)


@pytest.mark.parametrize("spec", sorted(CONTAINS))
def test_a_range_contains_what_connect_finds_in_it(spec: str) -> None:
    requirement = version_requirement(spec)
    assert requirement is not None
    assert [v for v in VERSIONS if requirement.contains(v)] == CONTAINS[spec]


@pytest.mark.parametrize("spec", sorted(INVALID))
def test_a_text_maven_refuses_is_refused_with_its_words(spec: str) -> None:
    with pytest.raises(InvalidVersionSpec) as raised:
        version_requirement(spec)
    assert str(raised.value) == INVALID[spec]


def test_latest_asks_for_nothing_and_surrounding_space_is_ignored() -> None:
    assert version_requirement("latest") is None
    requirement = version_requirement(" [4.0,5.0) ")
    assert requirement is not None and requirement.contains("4.3.1") and not requirement.contains("5.0")


@dataclass(frozen=True)
class Plugin:
    class_name: str
    type: str
    version: str | None


FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
#: As the real stack's 4.3.1 worker answers GET /connector-plugins?connectorsOnly=false (a part).
INSTALLED = [
    Plugin(FILE_SINK, "sink", "4.3.1"),
    Plugin("org.apache.kafka.connect.file.FileStreamSourceConnector", "source", "4.3.1"),
    Plugin("org.apache.kafka.connect.json.JsonConverter", "converter", "4.3.1"),
    Plugin("org.apache.kafka.connect.json.JsonConverter", "header_converter", "4.3.1"),
    Plugin("org.apache.kafka.connect.storage.SimpleHeaderConverter", "header_converter", "4.3.1"),
    Plugin("org.apache.kafka.connect.transforms.Cast$Value", "transformation", "4.3.1"),
    Plugin("org.apache.kafka.connect.transforms.predicates.HasHeaderKey", "predicate", "4.3.1"),
    Plugin("org.apache.kafka.connect.runtime.isolation.PluginsTest$TestConverter", "converter", None),
]
WHERE = "the Connect worker of ConnectCluster main"


def _config(**extra: str) -> dict[str, str]:
    return {"connector.class": FILE_SINK, "topics": "orders", "file": "/tmp/out", **extra}


def test_a_range_no_installed_version_matches_is_refused_naming_the_installed_ones() -> None:
    refusal = check_plugin_versions(_config(**{"connector.plugin.version": "[9.0,10.0)"}), INSTALLED, where=WHERE)
    assert refusal is not None
    assert refusal.reason == NOT_INSTALLED_REASON
    assert refusal.message.startswith(
        f"spec.version '[9.0,10.0)' matches no installed version of {FILE_SINK}: {WHERE} has 4.3.1. "
        "Nothing was created or changed"
    )


@pytest.mark.parametrize("version", ["4.3.1", "[4.0,5.0)", "[4.3.1]", "latest", "(,4.4)"])
def test_a_version_or_range_an_installed_version_matches_passes(version: str) -> None:
    assert check_plugin_versions(_config(**{"connector.plugin.version": version}), INSTALLED, where=WHERE) is None


@pytest.mark.parametrize("alias", ["FileStreamSink", "FileStreamSinkConnector"])
def test_the_class_may_be_named_by_its_alias(alias: str) -> None:
    config = _config(**{"connector.class": alias, "connector.plugin.version": "4.3"})
    refusal = check_plugin_versions(config, INSTALLED, where=WHERE)
    assert refusal is not None and FILE_SINK in refusal.message and "has 4.3.1" in refusal.message


def test_an_unparsable_version_is_invalid_with_mavens_words() -> None:
    refusal = check_plugin_versions(_config(**{"connector.plugin.version": "[1.0"}), INSTALLED, where=WHERE)
    assert refusal is not None
    assert refusal.reason == INVALID_REASON
    assert "spec.version '[1.0' is neither a version nor a Maven version range" in refusal.message
    assert "Unbounded range: [1.0" in refusal.message


def test_a_class_the_workers_do_not_have_is_left_to_connect() -> None:
    """Connect's own 400 names the missing class and lists what is there."""
    config = {"connector.class": "com.example.Missing", "connector.plugin.version": "[9.0,10.0)"}
    assert check_plugin_versions(config, INSTALLED, where=WHERE) is None


def test_converter_transform_and_predicate_versions_named_in_spec_config_are_checked() -> None:
    converter = _config(
        **{
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.plugin.version": "[9.0,10.0)",
        }
    )
    refusal = check_plugin_versions(converter, INSTALLED, where=WHERE)
    assert refusal is not None and refusal.reason == NOT_INSTALLED_REASON
    assert refusal.message.startswith("spec.config.value.converter.plugin.version '[9.0,10.0)' matches no installed")
    transform = _config(
        **{
            "transforms": "cast",
            "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
            "transforms.cast.plugin.version": "2.0",
        }
    )
    refusal = check_plugin_versions(transform, INSTALLED, where=WHERE)
    assert refusal is not None and "org.apache.kafka.connect.transforms.Cast$Value" in refusal.message
    predicate = _config(
        **{"predicates.p.type": "HasHeaderKey", "predicates.p.plugin.version": "[4.3.1]", "header.converter": "x"}
    )
    assert check_plugin_versions(predicate, INSTALLED, where=WHERE) is None
    header = _config(
        **{
            "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter",
            "header.converter.plugin.version": "1.0",
        }
    )
    refusal = check_plugin_versions(header, INSTALLED, where=WHERE)
    assert refusal is not None and "spec.config.header.converter.plugin.version" in refusal.message


def test_a_converter_version_without_its_class_in_the_config_is_left_to_connect() -> None:
    """The worker's default converter applies; which class that is, the listing does not say."""
    assert check_plugin_versions(_config(**{"key.converter.plugin.version": "[9,10)"}), INSTALLED, where=WHERE) is None


def test_installed_versions_are_distinct_newest_first_and_undefined_is_named() -> None:
    plugins = [Plugin("a.B", "sink", v) for v in ("1.0", "10.0", "2.0-SNAPSHOT", "2.0", "1.0")] + [
        Plugin("a.B", "source", None)
    ]
    assert installed_versions(plugins, "a.B", ("sink", "source")) == ["10.0", "2.0", "2.0-SNAPSHOT", "1.0", "undefined"]


def test_many_installed_versions_are_capped_in_the_message() -> None:
    plugins = [Plugin(FILE_SINK, "sink", f"1.{i}") for i in range(30)]
    refusal = check_plugin_versions(_config(**{"connector.plugin.version": "[9,)"}), plugins, where=WHERE)
    assert refusal is not None and "1.29, 1.28" in refusal.message and "and 10 more" in refusal.message


@pytest.mark.parametrize(("alias", "key"), [("Json", "value.converter"), ("Simple", "header.converter")])
def test_a_converter_may_be_named_by_its_pruned_alias(alias: str, key: str) -> None:
    """``PluginUtils.prunedName``: the simple name less its type's interface name."""
    refusal = check_plugin_versions(_config(**{key: alias, f"{key}.plugin.version": "[9,10)"}), INSTALLED, where=WHERE)
    assert refusal is not None and refusal.reason == NOT_INSTALLED_REASON and "has 4.3.1" in refusal.message


def test_a_hostile_version_text_is_shortened_in_the_message() -> None:
    plugins = [Plugin(FILE_SINK, "sink", "1." + "9" * 5000)]
    refusal = check_plugin_versions(_config(**{"connector.plugin.version": "[2,3)"}), plugins, where=WHERE)
    assert refusal is not None and len(refusal.message) < 500 and "9…" in refusal.message


def test_a_version_nested_too_deep_to_compare_is_left_to_connect() -> None:
    deep = "-1" * 5000
    plugins = [Plugin(FILE_SINK, "sink", deep), Plugin(FILE_SINK, "sink", f"{deep}-2")]
    assert check_plugin_versions(_config(**{"connector.plugin.version": "[2,3)"}), plugins, where=WHERE) is None


def test_unicode_digits_compare_as_their_values() -> None:
    """Java's ``Character.isDigit``: 4.3.1 in Arabic-Indic digits is 4.3.1."""
    assert compare_versions("\u0664.\u0663.\u0661", "4.3.1") == 0
    assert compare_versions("\u0661\u0660", "9") == 1
