# syntax=docker/dockerfile:1
# The gateway as a small image: a builder makes the wheel and a virtual environment, the final
# stage is python:3.11-slim with only that environment (no compiler, no pip cache, no sources).
#
#   docker build -t llm-gateway .
#   docker run -p 8080:8080 -v gateway-data:/data llm-gateway
#
# Without a config it serves the built-in default (the offline mock, plus OpenAI / Anthropic
# when OPENAI_API_KEY / ANTHROPIC_API_KEY are passed) and keeps its SQLite audit trail on the
# /data volume ($XDG_DATA_HOME/llm-gateway/audit.db). A config file: mount it and set
# GATEWAY_CONFIG (compose.yaml does). `docker run ... llm-gateway audit` runs `gateway audit`.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY providers ./providers
# [otel]: the OpenTelemetry exporter ([telemetry] in the config), imported only when enabled.
# pip is removed from the environment afterwards: nothing installs at run time.
RUN set -eux; \
    pip wheel --no-deps --wheel-dir /wheels .; \
    python -m venv /opt/venv; \
    /opt/venv/bin/pip install --no-cache-dir "$(ls /wheels/llm_gateway-*.whl)[otel]"; \
    /opt/venv/bin/pip uninstall --yes pip setuptools wheel || true

FROM ${PYTHON_IMAGE}
# A fixed uid/gid, so a volume's or a Kubernetes securityContext's ownership can name it.
ARG UID=10001
RUN groupadd --system --gid "${UID}" gateway \
 && useradd --system --uid "${UID}" --gid gateway --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin gateway \
 && mkdir -p /data && chown gateway:gateway /data && chmod 0750 /data
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/data \
    XDG_DATA_HOME=/data
# The default audit store (no [audit] store configured) is $XDG_DATA_HOME/llm-gateway/audit.db.
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001
EXPOSE 8080
# The slim image has no curl: Python's urllib, which fails on anything but a 2xx.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=3)"]
# The gateway handles SIGTERM itself: it stops accepting, lets in-flight exchanges finish
# ([server] shutdown_grace, 30 s by default) and flushes the audit trail.
STOPSIGNAL SIGTERM
ENTRYPOINT ["gateway"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
