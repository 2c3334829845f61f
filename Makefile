# The two commands: `make demo` and `make test` (as root, on Debian 12). Both install what is
# missing first, so they work on a fresh machine and are quick on a prepared one.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:/usr/local/go/bin:$(PATH)

BIN := target/release/isobench
# Short runs so the demo finishes in a few minutes; the suite file keeps its real settings.
DEMO_SET := --set workload.fio.runtime=1s --set workload.fio.size=128M

.PHONY: demo test build setup-demo setup-test lint clean

demo: setup-demo build
	$(BIN) server fetch cassandra
	$(BIN) run examples/quick.toml $(DEMO_SET)

test: setup-test
	cargo build --release
	$(BIN) server fetch cassandra
	cargo test --release -- --test-threads=2

build:
	cargo build --release

setup-demo:
	scripts/setup.sh demo

setup-test:
	scripts/setup.sh test

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings

clean:
	cargo clean
