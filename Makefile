# Common tasks. `make test` is exactly what CI runs (through .ci/run): the Python checker the
# MutatingAdmissionPolicy oracle test runs (PyPI), every Rust test, then the Helm chart check
# (rendering, lint, Kubernetes schemas; Python tools from PyPI).
.PHONY: build test lint bench bench-server run fmt load chart fuzz

build:
	cargo build --release

test:
	bash .ci/map-venv
	cargo test --all-targets
	cargo test --doc
	bash .ci/chart-test

# Regenerate deploy/celgate.yaml (the chart rendered) and charts/celgate/README.md (from
# values.yaml's comments: .ci/chart_readme.py), then run the chart check.
chart:
	bash .ci/chart-test --write

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings

fmt:
	cargo fmt --all

bench:
	cargo bench --bench cel

# The main job: the webhook on the bundled example policies.
run:
	cargo run --release -- serve --policies examples/policies --self-signed --ca-out /tmp/celgate-ca.pem --listen 127.0.0.1:8443 --metrics-listen 127.0.0.1:9090

load:
	bash benches/load/run.sh

# Server CPU per review (µs, allowed and denied, after a warm-up phase) on the bundled
# examples over TLS and HTTP/2: benches/load/server-cpu.sh. REVIEWS=n per phase (100000).
REVIEWS ?= 100000
bench-server:
	bash benches/load/server-cpu.sh $(REVIEWS)

# Fuzzing (tests/fuzz/): each target for FUZZ_SECONDS in a release build; failing inputs are
# kept under tests/fuzz-regressions/, which `cargo test --test fuzz` replays.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= parse eval doc review policy mutate
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" bash tests/fuzz/run.sh
