# The two commands of the README.
.PHONY: demo test build bench

build:
	./scripts/ensure-toolchain.sh
	cargo build --release -p thaw-cli

demo: build
	./target/release/thaw demo

test:
	./scripts/test.sh

bench: build
	./scripts/bench.sh
