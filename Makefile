# The two commands: `make demo` and `make test` (as root, on Debian 12). Both install what is
# missing first, so they work on a fresh machine and are quick on a prepared one.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:/usr/local/go/bin:$(PATH)

BIN := target/release/isobench

.PHONY: demo test check build setup-demo setup-test lint layers clean

demo: setup-demo build
	$(BIN) server fetch cassandra
	$(BIN) run examples/demo.toml

test: setup-test
	scripts/test.sh

build:
	cargo build --release

setup-demo:
	scripts/setup.sh demo

setup-test:
	scripts/setup.sh test

# The inner loop, on a built tree in under 3 minutes: format, lints, layers and sizes, the unit
# tests (the scripted clusters among them) and the intervals' simulation; no root, no tools.
check: lint layers
	cargo test --profile ci -q --lib --test statistics
	cargo test --profile ci -q -p cql-stress -p figures

# Dependencies point one way, down the layers scripts/layers.py lists (docs/architecture.md);
# no file over 800 lines, no function over 100.
layers:
	python3 scripts/layers.py
	python3 scripts/test_layers.py

lint:
	cargo fmt --all -- --check
	cargo clippy --profile ci --workspace --all-targets -- -D warnings

clean:
	cargo clean
