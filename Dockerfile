# kubesched: `kubesched run` as a second scheduler (see deploy/README.md).
#   docker build -t kubesched:0.1.0 .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Every dependency ships a manylinux wheel: no compiler needed. pip compiles the .pyc files at install
# time, so a read-only root filesystem costs nothing at startup.
WORKDIR /build
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install . && cd / && rm -rf /build

# The same numeric user as the Deployment's runAsUser (distroless' "nonroot", 65532).
RUN groupadd --gid 65532 kubesched \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kubesched
USER 65532:65532
WORKDIR /

# /metrics, /healthz and /readyz (plain HTTP).
EXPOSE 10259
ENTRYPOINT ["kubesched"]
CMD ["--help"]
