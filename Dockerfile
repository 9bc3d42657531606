# Build: the committed .sqlx data means no database is needed at build time.
#   docker build .                      the binary is built in a Rust image (needs a registry)
#   ./dev image                         where no registry can be reached: a Debian base made from
#                                       Debian's packages, and a binary built outside
#                                       (--build-arg BASE=… --build-arg BINARY=prebuilt)
ARG BASE=debian:bookworm-slim
ARG BINARY=build

FROM rust:1-bookworm AS build
WORKDIR /src
ENV SQLX_OFFLINE=true
COPY . .
RUN cargo build --release --locked --bin switchyard \
 && install -D target/release/switchyard /out/switchyard

FROM scratch AS prebuilt
COPY .image/switchyard /out/switchyard

FROM ${BINARY} AS binary

# Run: tmux, git and the PostgreSQL server, so the embedded default works in the container.
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql tmux git bubblewrap ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 switchyard \
 && install -d -o switchyard -g switchyard /data
COPY --from=binary /out/switchyard /usr/local/bin/switchyard
USER switchyard
# C.UTF-8: agents' screens (and the CLIs' own drawings) are UTF-8.
ENV LANG=C.UTF-8 \
    SWITCHYARD_DATA_DIR=/data \
    SWITCHYARD_LISTEN=0.0.0.0:8080 \
    SWITCHYARD_STATUS_LISTEN=0.0.0.0:8765 \
    SWITCHYARD_LOG_FORMAT=json
VOLUME /data
EXPOSE 8080 8765
STOPSIGNAL SIGTERM
ENTRYPOINT ["switchyard"]
CMD ["serve"]
