# syntax=docker/dockerfile:1
#
# infergate container images (see docs/action.md, "Container").
#
#   default target (gate): the engine image under test + the gate binary, i.e. "engine build +
#                          gate" in one image:  docker build --build-arg ENGINE_IMAGE=... .
#   --target slim:         Debian slim + the gate binary, for compare / report / merge jobs
#                          that need no engine and no GPU.
#
# The binary is built on Debian bookworm; it needs glibc >= 2.34, so it also runs on the
# Ubuntu 22.04 base of the vLLM images. NVML is loaded at run time from the host driver
# (docker run --gpus all mounts it), so no CUDA or NVIDIA library is baked in.

ARG ENGINE_IMAGE=vllm/vllm-openai:v0.19.1
ARG RUST_IMAGE=rust:1.95.0-slim-bookworm
ARG SLIM_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
 && install -m 0755 target/release/infergate /usr/local/bin/infergate \
 && /usr/local/bin/infergate --version

# Compare / report / merge only: no engine, no GPU, non-root.
FROM ${SLIM_IMAGE} AS slim
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="infergate (slim)" \
      org.opencontainers.image.description="infergate without an engine: compare, report and merge jobs" \
      org.opencontainers.image.source="https://github.com/infergate/infergate" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# CA roots for the GitHub API, taken from the builder so no package manager runs here.
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /usr/local/bin/infergate /usr/local/bin/infergate
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin gate
USER 10001:10001
WORKDIR /work
ENTRYPOINT ["/usr/local/bin/infergate"]
CMD ["--help"]

# Engine build + gate: the engine image under test with the gate on top. The gate boots the
# engine from the config's command (e.g. `vllm serve {model} --port {port}`) inside this
# container and measures it over loopback.
FROM ${ENGINE_IMAGE} AS gate
ARG VERSION=dev
ARG REVISION=unknown
ARG ENGINE_IMAGE
LABEL org.opencontainers.image.title="infergate" \
      org.opencontainers.image.description="Inference engine build under test + the infergate performance gate" \
      org.opencontainers.image.source="https://github.com/infergate/infergate" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${ENGINE_IMAGE}"
COPY --from=builder /usr/local/bin/infergate /usr/local/bin/infergate
# Non-root where the engine allows: vLLM runs fine as any user whose HOME (model cache) is
# writable. Engines that need root can be run with `docker run --user 0`.
RUN useradd --uid 10001 --create-home --shell /bin/bash gate \
 && mkdir -p /work /home/gate/.cache/huggingface \
 && chown -R 10001:10001 /work /home/gate
ENV HOME=/home/gate \
    HF_HOME=/home/gate/.cache/huggingface
USER 10001:10001
WORKDIR /work
ENTRYPOINT ["/usr/local/bin/infergate"]
CMD ["run", "--config", "/work/infergate.toml"]
