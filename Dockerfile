# syntax=docker/dockerfile:1
# Build: the dependencies are compiled in their own layer, so editing src/ does not rebuild them.
FROM rust:1-slim-bookworm AS builder
WORKDIR /build
COPY Cargo.toml Cargo.lock ./
# A stand-in crate with the real manifest: compiles every dependency and caches that layer.
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked --bin approval-resume \
    && rm -rf src
# The sources; migrations/ and openapi.yaml are compiled into the binary (sqlx::migrate!, include_str!), and build.rs
# tells cargo that migrations/ is an input.
COPY build.rs ./
COPY src ./src
COPY migrations ./migrations
COPY openapi.yaml ./
# touch: the stand-in files are older than the build artefacts, so make sure the real ones are rebuilt.
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked --bin approval-resume \
    && cp target/release/approval-resume /usr/local/bin/approval-resume

# Run: a slim Debian with CA certificates, curl for the compose healthcheck, and an unprivileged user.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin approval
COPY --from=builder /usr/local/bin/approval-resume /usr/local/bin/approval-resume
USER approval
# The binary sets its allocator's options itself (src/allocator.rs: memory committed as used, given back at once);
# MIMALLOC_PURGE_DELAY or MIMALLOC_ARENA_EAGER_COMMIT here would override them.
ENV LISTEN_ADDR=0.0.0.0:8080 \
    LOG_FORMAT=json
EXPOSE 8080
ENTRYPOINT ["approval-resume"]
CMD ["serve"]
