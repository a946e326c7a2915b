# One image for every component; the charts choose the command
# (python -m clusterhealth_agent | clusterhealth_remedy | clusterhealth_mci |
# clusterhealth_controlplane | clusterhealth_controlplane.scheduler |
# clusterhealth_controlplane.webhook). The image also holds the clusterhealth command
# (clusterhealth_cli, docs/cli.md).
#   docker build -t <registry>/clusterhealth-agent:0.1.0 .   (and tag it for the others)
# Not built in this repository's CI: the development machines have no Docker engine.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core core
COPY agent agent
COPY remedy remedy
COPY mci-provider mci-provider
COPY controlplane controlplane
COPY cli cli
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
ENTRYPOINT []
CMD ["python", "-m", "clusterhealth_agent", "--help"]
