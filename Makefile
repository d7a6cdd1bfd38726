# The two commands of the README.
.PHONY: demo test build bench bench-python bench-paper

build:
	./scripts/ensure-toolchain.sh
	cargo build --release -p thaw-cli

# The main demo: Thaw's read paths on a 1 GiB data set (Rust), then a DuckDB job
# over a cold data set, queued behind another job, without and with its inputs
# migrated into memory while it waits (Python).
demo: build
	./target/release/thaw demo
	./scripts/python-env.sh release
	.venv/bin/python -m thaw.demo

test:
	./scripts/test.sh

bench: build
	./scripts/bench.sh
	$(MAKE) bench-python

bench-python:
	./scripts/python-env.sh release
	.venv/bin/python -m thaw_bench.scripts.read_parquet --size 1GiB --repeats 5 --out bench-out/python-parquet.json | tee bench-out/python-parquet.txt
	.venv/bin/python -m thaw_bench.scripts.full_tier --out bench-out/full-tier.json | tee bench-out/full-tier.txt
	.venv/bin/python -m thaw_bench.scripts.user_paths --size 1GiB --repeats 5 --out bench-out/python-user-paths.json | tee bench-out/python-user-paths.txt

# The papers' experiments, reduced (under 30 minutes here): SWIM, sort, wordcount,
# interference patterns and TPC-H on an emulated 7-node cluster, every
# configuration side by side; reports and figures under bench-out/paper/.
bench-paper:
	./scripts/python-env.sh release
	cargo build --locked --release -p thaw-bench
	.venv/bin/python -m thaw_bench paper --out bench-out/paper
