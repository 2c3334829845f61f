# The two commands: `make demo` and `make test` (as root, on Debian 12). Both install what is
# missing first, so they work on a fresh machine and are quick on a prepared one.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:/usr/local/go/bin:$(PATH)

BIN := target/release/isobench

.PHONY: demo test build setup-demo setup-test lint layers clean

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

# Dependencies point one way, down the layers scripts/layers.py lists (docs/architecture.md).
layers:
	python3 scripts/layers.py

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings

clean:
	cargo clean
