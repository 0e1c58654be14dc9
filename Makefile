# Common tasks. `make test` is exactly what CI runs (through .ci/run).
.PHONY: build test lint bench run fmt

build:
	cargo build --release

test:
	cargo test --all-targets

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings

fmt:
	cargo fmt --all

bench:
	cargo bench --bench cel

# The main job until the server exists: evaluate a bundled example.
run:
	cargo run --release -- expr "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))" --var object=examples/pod.json --cost
