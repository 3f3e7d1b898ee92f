# syntax=docker/dockerfile:1
# Placer: `docker build -t placer:dev .` from the repository root.

# Build stage: the release binary of the `placer` crate (kube-rs with rustls/ring, so no
# OpenSSL is needed at run time). The release profile carries no debug info and strips
# symbols; `strip` runs again so the image never ships an unstripped binary whatever the
# profile says.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p placer \
    && cp target/release/placer /usr/local/bin/placer \
    && strip --strip-all /usr/local/bin/placer

# Run stage: glibc and CA certificates only, non-root.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/placer /usr/local/bin/placer
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/placer"]
CMD ["serve", "--config", "/etc/placer/config.yaml"]
