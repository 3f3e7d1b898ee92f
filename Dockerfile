# syntax=docker/dockerfile:1
# Placer: `docker build -t placer:dev .` from the repository root.

# Build stage: the `dist` profile binary of the `placer` crate (the release profile plus
# thin LTO and one codegen unit per crate, see Cargo.toml; kube-rs with rustls/ring, so no
# OpenSSL is needed at run time). It carries no debug info and strips symbols; `strip`
# runs again so the image never ships an unstripped binary whatever the profile says.
# The dist build takes much longer than `--release` (about an hour on 2 loaded cores).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked -p placer \
    && cp target/dist/placer /usr/local/bin/placer \
    && strip --strip-all /usr/local/bin/placer

# Run stage: glibc and CA certificates only, non-root.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/placer /usr/local/bin/placer
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/placer"]
CMD ["serve", "--config", "/etc/placer/config.yaml"]
