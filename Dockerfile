# isobench's pod image for a real cluster (the k8s environment's default image is
# isobench:VERSION). Build it where Docker or another builder runs, push it to your registry and
# name it with image = "…" on the env:
#
#   docker build -t registry.example.com/isobench:0.1.0 . && docker push registry.example.com/isobench:0.1.0
#
# Without a builder (this project's CI), scripts/k8s-image.sh writes the same contents as a
# docker-archive from the host's binaries, for `ctr -n k8s.io images import`.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked

FROM debian:bookworm-slim
# The served databases' loads and clients too: pgbench (in Debian's server package), psql,
# redis-benchmark and redis-cli, mariadb.
RUN apt-get update \
    && apt-get install -y --no-install-recommends fio sysbench iperf3 postgresql-15 redis-tools mariadb-client \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/isobench /usr/local/bin/isobench
ENTRYPOINT ["/usr/local/bin/isobench"]
