# One image for every Rewind role; the command picks it:
#   rewind collector ...   OTLP receivers writing into ClickHouse
#   rewind worker ...      replay worker HTTP API
#   rewind migrate ...     create or upgrade the tables
# Build: docker build -t rewind:0.1.0 .

FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY exporter exporter
COPY collector collector
COPY replay replay
# Wheels for the project and every dependency of the server extra, built once.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[server]"

FROM python:3.11.11-slim-bookworm
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "rewind-otel[server]" \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/rewind rewind \
    && mkdir -p /var/lib/rewind/spool \
    && chown -R rewind:rewind /var/lib/rewind
USER 10001:10001
WORKDIR /var/lib/rewind
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# 4317 OTLP/gRPC and 4318 OTLP/HTTP + /health /ready /metrics (collector); 8787 worker API.
EXPOSE 4317 4318 8787
CMD ["rewind", "--help"]
