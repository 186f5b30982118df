FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY providers ./providers
COPY config ./config
RUN pip install --no-cache-dir .

EXPOSE 8080
# Mount a config and set GATEWAY_CONFIG, or pass keys as OPENAI_API_KEY / ANTHROPIC_API_KEY.
CMD ["gateway", "serve", "--host", "0.0.0.0", "--port", "8080"]
