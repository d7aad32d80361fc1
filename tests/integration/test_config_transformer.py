"""``config_references`` against Kafka's own ConfigTransformer, in a JVM (issue 43, point 1).

The policy is only as good as its model of what Connect resolves. This test runs the stack's
kafka-clients jar: for each value, the matches of ``ConfigTransformer``'s own ``DEFAULT_PATTERN``
(read by reflection, so a change of Kafka's pattern shows up here) with Java's ``Matcher.find``
loop, and what ``ConfigTransformer.transform`` actually asks recording providers for. Both must
equal what ``config_references`` finds, on Kafka's ConfigTransformerTest values, the corpus' hostile
values and 3,000 generated ones (a fixed seed, an alphabet of the characters that matter).
"""

from __future__ import annotations

import base64
import random
import shutil
import subprocess
from pathlib import Path

from connect_offsets.models.config_references import config_references
from tests.integration.connect_worker import stack_module

#: Providers the transformer is given (recording every lookup); references to others it leaves alone.
PROVIDERS = ("secrets", "file", "env", "nope", "a", "test")

PROBE = r"""
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.regex.*;
import org.apache.kafka.common.config.ConfigData;
import org.apache.kafka.common.config.ConfigTransformer;
import org.apache.kafka.common.config.provider.ConfigProvider;

public class Probe {
    static String b64(String s) { return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8)); }

    static final List<String> asked = new ArrayList<>();

    static class Recording implements ConfigProvider {
        final String name;
        Recording(String name) { this.name = name; }
        public void configure(Map<String, ?> configs) {}
        public ConfigData get(String path) { return new ConfigData(Map.of()); }
        public ConfigData get(String path, Set<String> keys) {
            for (String key : keys) asked.add(b64(name) + " " + b64(path) + " " + b64(key));
            return new ConfigData(Map.of());
        }
        public void close() {}
    }

    public static void main(String[] args) throws Exception {
        Field field = ConfigTransformer.class.getDeclaredField("DEFAULT_PATTERN");
        field.setAccessible(true);
        Pattern pattern = (Pattern) field.get(null);
        Map<String, ConfigProvider> providers = new HashMap<>();
        for (String name : args) providers.put(name, new Recording(name));
        ConfigTransformer transformer = new ConfigTransformer(providers);
        Scanner in = new Scanner(System.in, StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder();
        while (in.hasNextLine()) {
            String value = new String(Base64.getDecoder().decode(in.nextLine().trim()), StandardCharsets.UTF_8);
            Matcher m = pattern.matcher(value);
            List<String> found = new ArrayList<>();
            while (m.find()) {
                String path = m.group(3) != null ? m.group(3) : "";
                found.add(b64(m.group(1)) + " " + b64(path) + " " + b64(m.group(4)));
            }
            asked.clear();
            transformer.transform(Map.of("k", value));
            List<String> sortedAsked = new ArrayList<>(new TreeSet<>(asked));
            out.append(String.join(",", found)).append("\t").append(String.join(",", sortedAsked)).append("\n");
        }
        System.out.print(out);
    }
}
"""

FIXED = [
    "${test:testPath:testKey}",
    "hello, ${test:testPath:testKey}; goodbye, ${test:testPath:testKeyWithTTL}!!!",
    "${test:testPath:missingKey}",
    "${nope:x}${secrets:other-ns/db:password}",
    "${nope:x:y}${secrets:other-ns/db:password}",
    "${file:/etc/kafka/worker.properties:sasl.jaas.config}",
    "${env:AWS_SECRET_ACCESS_KEY}",
    "price ${USD}",
    "$${secrets:other/db:pw}",
    "${secrets:${x:y}}",
    "${a:b}${a:b}${a:b}",
    "${a:b\u2028c}",
    "${a:b\u0085c}",
    "${a:b\u00a0c}",
    "\uff04\uff5bsecrets:a:b\uff5d",
    "${secrets:team-a/../team-b/db:pw}",
    "${ secrets :x:y}",
]
ALPHABET = [
    "${",
    "${",
    "$${",
    "$",
    "{",
    "}",
    "}",
    ":",
    ":",
    "/",
    "a",
    "secrets",
    "file",
    "..",
    " ",
    "\n",
    "\r",
    "\u2028",
    "\u0085",
]


def generated(count: int) -> list[str]:
    rng = random.Random(43)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 24))) for _ in range(count)]


def decoded(triples: str) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for triple in filter(None, triples.split(",")):
        provider, path, key = (base64.b64decode(part).decode("utf-8") for part in triple.split(" "))
        out.append((provider, path, key))
    return out


def test_config_references_are_what_kafkas_config_transformer_resolves(tmp_path: Path) -> None:
    javac, java = shutil.which("javac"), shutil.which("java")
    assert javac is not None and java is not None, "a JDK is part of the stack's requirements"
    libs = stack_module().KAFKA_LIBS
    assert (libs / ".complete").exists(), f"Kafka jars missing in {libs}: make deps"
    classpath = f"{libs}/*"
    (tmp_path / "Probe.java").write_text(PROBE)
    subprocess.run([javac, "-cp", classpath, "-d", str(tmp_path), str(tmp_path / "Probe.java")], check=True)
    values = FIXED + generated(3000)
    stdin = "\n".join(base64.b64encode(v.encode("utf-8")).decode() for v in values) + "\n"
    answer = subprocess.run(
        [java, "-cp", f"{tmp_path}:{classpath}", "Probe", *PROVIDERS],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = answer.stdout.split("\n")[: len(values)]
    assert len(lines) == len(values)
    with_references = 0
    for value, line in zip(values, lines, strict=True):
        matched, asked = line.split("\t")
        ours = [(r.provider, r.path, r.key) for r in config_references(value)]
        assert ours == decoded(matched), f"pattern differs on {value!r}"
        # What the transformer asked its providers for: exactly our references to those providers.
        assert sorted(set(decoded(asked))) == sorted({t for t in ours if t[0] in PROVIDERS}), value
        with_references += bool(ours)
    # The generator must exercise the matcher, not only values without any reference.
    assert with_references > 300
