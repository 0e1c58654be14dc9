# syntax=docker/dockerfile:1
# celgate: a multi-stage build into a distroless image (no shell, no package manager),
# running as the non-root user 65532.
#   docker build -t celgate .
#   docker run --rm -p 8443:8443 celgate      # the bundled example policies, self-signed

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
# The cache mounts keep the registry and compiled dependencies between builds. No debug info
# and stripped symbols in the image; the release profile keeps them for
# profiling on developer machines.
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=symbols
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin celgate \
    && install -D target/release/celgate /out/celgate

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/celgate /usr/local/bin/celgate
COPY examples/policies /etc/celgate/policies
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/celgate"]
CMD ["serve", "--policies=/etc/celgate/policies", "--self-signed", "--listen=0.0.0.0:8443", "--metrics-listen=0.0.0.0:9090"]
