# redcar container image. Build from the repository root:
#
#   docker build -t redcar:0.1.0 .
#
# The image runs `redcar --config /etc/redcar/redcar.yaml` (examples/redcar.yaml) as a non-root
# user. Set the seeds with REDCAR_CLUSTER=host:port,... or mount your own config over it.
#
# Binding: the packaged config listens on 127.0.0.1:6380, /run/redcar/redcar.sock and
# 127.0.0.1:9190 (admin). Inside a container, 127.0.0.1 is the container's (or the Kubernetes
# pod's) own network namespace: that is the sidecar case, and nothing outside the pod can reach
# redcar. For the Unix socket, mount a volume shared with the application at /run/redcar.
# Do not publish 0.0.0.0:6380 unless `auth.requirepass`/`auth.users` or `tls` is configured
# (docs/security.md): anyone who reaches the port can run commands against the whole cluster.

# --- build: the same command as `make build` (tests/it/deploy.rs checks that they agree) ---
# 1.88: Cargo.toml's `rust-version` (the highest any crate in Cargo.lock needs: time, proptest).
FROM rust:1.88-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release

# --- runtime: Debian slim, the binary and one config file ---
# Not distroless: the HEALTHCHECK below needs a shell. bookworm-slim already ships bash, head
# and grep, so the check is bash's /dev/tcp and no HTTP client is installed. (Kubernetes does
# not use HEALTHCHECK; its probes call /readyz and /healthz themselves, see examples/kubernetes.)
FROM debian:bookworm-slim
RUN groupadd --system --gid 10001 redcar \
    && useradd --system --uid 10001 --gid redcar --no-create-home --shell /usr/sbin/nologin redcar \
    && mkdir -p /run/redcar /etc/redcar \
    && chown redcar:redcar /run/redcar
COPY --from=build /src/target/release/redcar /usr/local/bin/redcar
COPY examples/redcar.yaml /etc/redcar/redcar.yaml
USER 10001:10001
# 6380: clients (TCP); 9190: admin HTTP (/healthz, /readyz, /metrics).
EXPOSE 6380 9190
# Healthy once redcar has a slot map covering all 16384 slots (GET /readyz answers 200).
# Needs the admin listener on 127.0.0.1:9190, as in the packaged config.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9190 && printf 'GET /readyz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]
# SIGTERM drains (drain_timeout, 10s by default): give `docker stop` at least that (-t 15).
STOPSIGNAL SIGTERM
ENTRYPOINT ["redcar"]
CMD ["--config", "/etc/redcar/redcar.yaml"]
