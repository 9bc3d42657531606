# Build: the committed .sqlx data means no database is needed at build time.
FROM rust:1-bookworm AS build
WORKDIR /src
ENV SQLX_OFFLINE=true
COPY . .
RUN cargo build --release --locked --bin switchyard

# Run: tmux, git and the PostgreSQL server, so the embedded default works in the container.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql tmux git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 switchyard \
 && install -d -o switchyard -g switchyard /data
COPY --from=build /src/target/release/switchyard /usr/local/bin/switchyard
USER switchyard
ENV SWITCHYARD_DATA_DIR=/data \
    SWITCHYARD_LISTEN=0.0.0.0:8080 \
    SWITCHYARD_STATUS_LISTEN=0.0.0.0:8765 \
    SWITCHYARD_LOG_FORMAT=json
VOLUME /data
EXPOSE 8080 8765
STOPSIGNAL SIGTERM
ENTRYPOINT ["switchyard"]
CMD ["serve"]
