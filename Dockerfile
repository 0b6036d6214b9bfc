# yuxi-dash: the Streamlit operator console. Slim, non-root, health-checked.
# Build: docker build -t yuxi-dash .   Run several replicas behind a sticky proxy: compose.yaml.

# Build stage: the wheel (pure Python; no compiler needed).
FROM python:3.11-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY yuxi_dash ./yuxi_dash
RUN PIP_CONSTRAINT=requirements.lock pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRAPHITI_TELEMETRY_ENABLED=false \
    YUXI_DASH_AUTH_MODE=proxy \
    YUXI_DASH_DATABASE_URL=sqlite:////app/var/yuxi_dash.db \
    YUXI_DASH_WORKDIR=/app/var/workdir \
    YUXI_DASH_FALKORDB_DIR=/app/var/falkordb

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin yuxi
WORKDIR /app

COPY requirements.lock ./
COPY --from=wheel /wheels /wheels
RUN pip install -c requirements.lock /wheels/*.whl && rm -rf /wheels /root/.cache \
    && yuxi-dash --version
COPY app.py ./
COPY app_pages ./app_pages
COPY .streamlit/config.toml ./.streamlit/config.toml

RUN mkdir -p /app/var && chown -R yuxi:yuxi /app/var
USER yuxi

EXPOSE 8501
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).status == 200 else 1)"

# proxy mode: identity comes from the reverse proxy (see compose.yaml); local mode refuses 0.0.0.0.
CMD ["yuxi-dash", "serve", "--server.address", "0.0.0.0", "--server.port", "8501"]
