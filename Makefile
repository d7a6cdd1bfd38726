# The two commands of the README.
.PHONY: demo test build java bench bench-python bench-paper bench-paper-quick

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

# The jars for Hadoop and Spark (java/*/target/thaw-*.jar), each carrying the
# release native library: `thaw://` for any Hadoop FileSystem user (docs/hadoop.md).
java:
	./scripts/ensure-toolchain.sh
	./scripts/java.sh release

bench: build
	./scripts/bench.sh
	$(MAKE) bench-python

bench-python:
	./scripts/python-env.sh release
	.venv/bin/python -m thaw_bench.scripts.read_parquet --size 1GiB --repeats 5 --out bench-out/python-parquet.json | tee bench-out/python-parquet.txt
	.venv/bin/python -m thaw_bench.scripts.full_tier --out bench-out/full-tier.json | tee bench-out/full-tier.txt
	.venv/bin/python -m thaw_bench.scripts.user_paths --size 1GiB --repeats 5 --out bench-out/python-user-paths.json | tee bench-out/python-user-paths.txt

# Every experiment of the five papers (thaw_bench.paper's sections: the trace
# analyses, SWIM on both traces with the bounds and ablations, on a shaped
# network too, sort, wordcount, interference, TPC-H, CAVA's locality levels and
# W1-W6, Tachyon's four), each beside its paper's figure; reports under
# bench-out/paper/<section>/, the index (sections, figures, times) in
# bench-out/paper/index.md. Sections on the network need root (skipped otherwise).
bench-paper:
	./scripts/python-env.sh release
	cargo build --locked --release -p thaw-bench
	.venv/bin/python -m thaw_bench paper --out bench-out/paper

# The same sections, each in a small configuration (a smoke test; make test runs
# it too, as bench/tests/test_paper_quick.py).
bench-paper-quick:
	./scripts/python-env.sh release
	cargo build --locked --release -p thaw-bench
	.venv/bin/python -m thaw_bench paper --quick --out bench-out/paper-quick
