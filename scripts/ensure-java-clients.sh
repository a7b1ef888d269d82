#!/usr/bin/env bash
# Build the Jedis and Lettuce client program the tests drive (tests/clients/java/, run by
# tests/it/clients.rs and tests/it/facade.rs) into target/java-clients/redcar-java-clients.jar,
# its dependencies in target/java-clients/lib/ (named by the jar's manifest, so `java -jar` runs
# it), with the versions pinned in tests/clients/java/pom.xml fetched from Maven Central into the
# local repository target/java-clients/m2; once that is filled a rebuild needs no network. A JDK
# (17 or newer) and Maven come from apt (`default-jdk-headless maven`) when missing and run as
# root; otherwise the command is printed (exit 1).
# Idempotent: when the sources have not changed since the last build it only hashes them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/tests/clients/java"
out="$root/target/java-clients"
jar="$out/redcar-java-clients.jar"

missing=()
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if ((${#missing[@]})); then
    echo "missing: ${missing[*]}" >&2
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        # -o DPkg::Lock::Timeout: wait up to 5 min for another apt or dpkg (unattended-upgrades,
        # another ensure script) to release its lock instead of failing at once (apt >= 1.9.11).
        apt-get -o DPkg::Lock::Timeout=300 update
        apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${missing[@]}"
    else
        echo "sudo apt-get install -y --no-install-recommends ${missing[*]}"
        exit 1
    fi
fi

hash=$( (cat "$src/pom.xml" && find "$src/src" -type f -name '*.java' | sort | xargs cat) | sha256sum | cut -d' ' -f1)
if [[ ! -f $jar || ! -d $out/lib || $(cat "$out/.src-hash" 2>/dev/null) != "$hash" ]]; then
    mkdir -p "$out"
    # lib/ is rebuilt whole: copy-dependencies never removes a jar a version bump left behind.
    rm -rf "$out/lib" "$out/build" "$jar"
    # Maven 3.8 prints stray colour codes even with -B -q: keep its output for a failure only.
    if ! mvn -B -q -f "$src/pom.xml" -Dmaven.repo.local="$out/m2" -Dredcar.out="$out" package \
        >"$out/build.log" 2>&1; then
        cat "$out/build.log" >&2
        echo "mvn package failed (log: $out/build.log)" >&2
        exit 1
    fi
    echo "$hash" >"$out/.src-hash"
fi
java_version=$(java -version 2>&1 | sed -n '1s/.*version "\([^"]*\)".*/\1/p')
libs=$(cd "$out/lib" && ls jedis-*.jar lettuce-core-*.jar | sed 's/\.jar$//' | paste -sd' ')
echo "ok: java $java_version, $libs ($jar)"
