# syntax=docker/dockerfile:1
# celgate: a multi-stage build into a distroless image (no shell, no package manager),
# running as the non-root user 65532.
#   docker build -t celgate .
#   docker run --rm -p 8443:8443 -p 9090:9090 celgate   # the bundled example policies,
#                                                        # self-signed; metrics on :9090
# For a cluster, push it and name it to the chart (charts/celgate/README.md):
#   docker build -t REGISTRY/celgate:0.1.0 . && docker push REGISTRY/celgate:0.1.0
#
# Both base images are pinned by the digest of their multi-platform index, so a rebuild starts
# from the same bytes; the tag beside the digest only says what it was. To update one, read the
# tag's current index digest and replace the digest here, e.g.:
#   docker buildx imagetools inspect rust:1.95-bookworm            # the "Digest:" line
#   docker buildx imagetools inspect gcr.io/distroless/cc-debian12:nonroot
# (or `crane digest IMAGE:TAG`, or `skopeo inspect --raw docker://IMAGE:TAG | sha256sum`).

FROM rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
WORKDIR /src
# The workspace: the root package and its two crates (the engine's lint includes
# crates/celgate-engine/assets/ at compile time). Cargo refuses a manifest whose declared
# [[test]] and [[bench]] targets have no file, even to build the binary alone, so their files
# come too; they are not compiled. `.ci/dockerfile-check` replays these lines without Docker
# and fails CI when the stage no longer compiles from what it copies.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY benches/*.rs ./benches/
COPY tests/*.rs ./tests/
# The cache mounts keep the registry and compiled dependencies between builds. No debug info
# and stripped symbols in the image; the release profile keeps them for
# profiling on developer machines.
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=symbols
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin celgate \
    && install -D target/release/celgate /out/celgate

FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
COPY --from=build /out/celgate /usr/local/bin/celgate
COPY examples/policies /etc/celgate/policies
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/celgate"]
CMD ["serve", "--policies=/etc/celgate/policies", "--self-signed", "--listen=0.0.0.0:8443", "--metrics-listen=0.0.0.0:9090"]
