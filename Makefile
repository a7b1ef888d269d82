# redcar developer entry points. `make help` lists them.
CARGO ?= cargo

.PHONY: help all build deb demo test doc deny chaos fuzz bench bench-connections bench-crowd bench-connect-burst bench-nearcache bench-replica-miss bench-fleet bench-upgrade flamegraph fmt fmt-check clippy clean ensure-redis ensure-clients ensure-node-clients ensure-go-clients ensure-java-clients ensure-browser ensure-promtool status-screenshot

all: build

help:
	@echo "make build   - cargo build --release (target/release/redcar)"
	@echo "make deb     - the Debian package: binary, systemd unit, /etc/redcar/redcar.yaml, man pages"
	@echo "               -> target/debian/redcar_<version>_<arch>.deb (docs/packaging.md)"
	@echo "make demo    - release build, a local 3+3 cluster + redcar, a short workload, a benchmark and a"
	@echo "               failure drill (scripts/demo.sh; ~11 min on a fresh 2-core machine, nearly all the"
	@echo "               build); DEMO_KEEP=1 keeps the cluster and the status page up until Ctrl-C"
	@echo "make test    - what CI runs (~15-25 min): installers, fmt check, clippy -D warnings, then"
	@echo "               cargo test --all-targets --no-fail-fast, cargo doc (as make doc), cargo deny"
	@echo "               (if installed), fuzz (10 s per target), the chaos selftest, two 30 s chaos soaks"
	@echo "               (plain, and with the near cache on) and loom's model check of redcar-sync; every"
	@echo "               step runs even after a failure, summary at the end (scripts/test-all.sh)"
	@echo "make doc     - cargo doc --workspace --no-deps --document-private-items with warnings denied:"
	@echo "               every intra-doc link must resolve (target/doc/redcar/index.html)"
	@echo "make deny    - cargo-deny over the dependencies: licences, banned crates, sources, RustSec"
	@echo "               advisories (deny.toml; installs cargo-deny into target/tools the first time,"
	@echo "               a few minutes; make test runs the same check when it is installed)"
	@echo "make bench   - the benchmark suite: standalone, direct cluster, redcar and nutcracker; CPU per"
	@echo "               command, worker scaling, per-request and rate-limit workloads; checks the"
	@echo "               performance targets and writes bench/RESULTS.md (~10 min; bench/README.md)"
	@echo "make chaos   - fault-injection soak: 3+3 cluster, redcar (prefer-replica), 10 clients, seeded"
	@echo "               kills/freezes/failovers/migrations/restarts, then a history checker; CHAOS_SECONDS"
	@echo "               (default 60), CHAOS_SEED; exit 1 keeps the logs (tools/chaos, docs/resilience.md)"
	@echo "make flamegraph - perf flame graphs of redcar under GET/SET -P 16 into docs/perf/"
	@echo "make fuzz    - run the cargo-fuzz targets for FUZZ_SECONDS (default 300) each"
	@echo "make bench-connections - per-request and rate-limit workloads, direct vs redcar, on loopback"
	@echo "               and a simulated network; writes bench/RESULTS-connections.md"
	@echo "make bench-crowd - the cost of one client: CPU per command, RSS per idle client (10,000 and"
	@echo "               15,000), the rate with an idle crowd; writes bench/RESULTS-crowd.md (bench/crowd.sh)"
	@echo "make bench-connect-burst - 5,000 connects from 50 connectors at client.accept_backlog 128 and the"
	@echo "               default: connect times, listen-queue overflows; bench/RESULTS-connect-burst.md"
	@echo "make bench-replica-miss - what confirming a replica's \"absent\" with the primary costs: the share of"
	@echo "               reads it adds at 0/5/20 % misses (bench/replica_miss.sh; bench/RESULTS-replica-miss.md)"
	@echo "make bench-fleet - 50 sidecars in front of one local cluster, idle and through a failover: per node,"
	@echo "               connections, topology commands, bytes and node CPU; writes bench/RESULTS-fleet.md"
	@echo "make bench-nearcache - the near cache off vs on: 50 clients -P 1, 90 % GET / 10 % SET over 100 hot keys"
	@echo "               (bench/mixload), the nodes' commands and CPU, the staleness probe; writes"
	@echo "               bench/RESULTS-nearcache.md (bench/nearcache.sh, ~2 min; also the last part of make bench)"
	@echo "make bench-upgrade - an upgrade in place vs a plain restart under load (3 each): refused connects,"
	@echo "               command errors, closed connections, connect and command p99 (bench/upgrade.sh)"
	@echo "make status-screenshot - re-take docs/img/status-page.png (scripts/status-screenshot.sh)"
	@echo "make fmt     - cargo fmt --all"
	@echo "make clippy  - cargo clippy --workspace --all-targets -- -D warnings"
	@echo "make clean   - cargo clean"

ensure-redis:
	scripts/ensure-redis.sh

# chromium (headless) for tests/it/status_page.rs and scripts/status-screenshot.sh
ensure-browser:
	scripts/ensure-browser.sh

# php-cli + phpredis + predis (apt) and redis-py + hiredis (target/pyenv) for tests/it/clients.rs
ensure-clients:
	scripts/ensure-clients.sh

# node-redis + ioredis (npm ci into target/node) and go-redis v9 (built into target/go-clients)
# for tests/it/clients.rs and tests/it/facade.rs
ensure-node-clients:
	scripts/ensure-node-clients.sh

ensure-go-clients:
	scripts/ensure-go-clients.sh

# Jedis + Lettuce (Maven, into target/java-clients; JDK and maven from apt when missing)
ensure-java-clients:
	scripts/ensure-java-clients.sh

# promtool (apt package prometheus) for tests/it/observability_examples.rs and
# scripts/check-observability-examples.sh (the alerting rules in examples/prometheus/)
ensure-promtool:
	scripts/ensure-promtool.sh

build:
	$(CARGO) build --release

# Release binary + man pages (examples/manpage.rs) into a .deb with dpkg-deb (scripts/build-deb.sh
# says why not cargo-deb); tests/it/deb.rs installs one into a temporary root.
deb:
	CARGO=$(CARGO) scripts/build-deb.sh

demo: ensure-redis build
	scripts/demo.sh

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The prerequisites stop at the first failure; then scripts/test-all.sh runs every test step
# (cargo test --all-targets --no-fail-fast, cargo doc, cargo deny, fuzz, the chaos selftest, both soaks,
# loom) even after one fails, and ends with a summary of each step's result (exit 1 if any failed).
test: ensure-redis ensure-clients ensure-node-clients ensure-go-clients ensure-java-clients ensure-browser ensure-promtool fmt-check clippy
	CARGO="$(CARGO)" CHAOS_PY="$(CHAOS_PY)" scripts/test-all.sh

# The API docs, private items included, as `make test` checks them: a warning (a link to an item
# that moved, or from a public item to a private one) fails the build.
doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --document-private-items

# cargo-deny (deny.toml, docs/dependencies.md); installs it into target/tools when missing.
deny:
	scripts/deny.sh --install

# `make test` and `make chaos` both draw a new seed each run (printed, and named again on a
# failure) to keep finding new cases; CHAOS_SEED=N replays one. The second soak of `make test`
# has the near cache on for every key (docs/resilience.md, "The chaos soak").
# The chaos soak (docs/resilience.md, "The chaos soak"): CHAOS_SECONDS of load (default
# 60) with a seeded schedule of faults (CHAOS_SEED, default random; the seed is always printed).
# Standard library only (its own RESP client: no client-side retries); any python3 >= 3.8.
CHAOS_PY = $(if $(wildcard target/pyenv/bin/python),target/pyenv/bin/python,python3)
chaos: ensure-redis build
	$(CHAOS_PY) tools/chaos/soak.py --seconds $${CHAOS_SECONDS:-60} $${CHAOS_SEED:+--seed $$CHAOS_SEED}

# A long fuzz run (FUZZ_SECONDS per target; needs the nightly toolchain, installs cargo-fuzz).
fuzz:
	FUZZ_SECONDS=$${FUZZ_SECONDS:-300} scripts/fuzz.sh

# nutcracker is installed by bench/run.sh itself (scripts/ensure-nutcracker.sh; skipped with a note
# when it cannot be); the clients only when the connection workloads run (BENCH_CONNECTIONS=0 skips).
bench: ensure-redis build
	@if [ "$${BENCH_CONNECTIONS:-1}" != 0 ]; then scripts/ensure-clients.sh; fi
	bench/run.sh

# Not part of `make test`: needs perf (linux-perf) and inferno; builds --profile profiling.
flamegraph: ensure-redis
	bench/flamegraph.sh

# Not part of `make test`: a few minutes, needs php (phpredis, predis) and redis-py.
bench-connections: ensure-redis ensure-clients build
	bench/connections.sh

# Not part of `make test`: a few minutes; installs nutcracker itself when it can (root + apt).
bench-crowd: ensure-redis build
	bench/crowd.sh

# Not part of `make test`: about a minute (bench/connect_burst.sh; python3 and ss).
bench-connect-burst: ensure-redis build
	bench/connect_burst.sh

# Not part of `make test`: about 2 minutes (bench/nearcache.sh builds bench/mixload itself).
bench-nearcache: ensure-redis build
	bench/nearcache.sh

# Not part of `make test`: about 3 minutes (bench/replica_miss.sh; redis-benchmark).
bench-replica-miss: ensure-redis build
	bench/replica_miss.sh
# Not part of `make test`: about 2 minutes (bench/fleet.sh; FLEET_SIDECARS, FLEET_PRIMARIES).
bench-fleet: ensure-redis build
	bench/fleet.sh
# Not part of `make test`: under a minute (bench/upgrade.sh; python3).
bench-upgrade: ensure-redis build
	bench/upgrade.sh

# Re-take docs/img/status-page.png (a local cluster, traffic, one replica killed).
status-screenshot: ensure-redis ensure-browser
	$(CARGO) build
	scripts/status-screenshot.sh

clean:
	$(CARGO) clean
