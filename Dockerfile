# syntax=docker/dockerfile:1
# One image for every component; the charts choose the command
# (python -m clusterhealth_agent | clusterhealth_remedy | clusterhealth_mci |
# clusterhealth_controlplane | clusterhealth_controlplane.scheduler |
# clusterhealth_controlplane.webhook). It also holds the clusterhealth command
# (clusterhealth_cli, docs/cli.md). Build it with `make image` (docs/operations.md,
# "Images"): with Docker or buildah when present, else without a daemon
# (localenv/clusterhealth_localenv/images.py executes THIS file in a chroot: keep to the
# instructions it knows, FROM/ARG/COPY/RUN [--mount=type=bind]/ENV/WORKDIR/USER/
# ENTRYPOINT/CMD/LABEL; it refuses any other).
#
# BASE: Debian 12 (bookworm); the daemon-less build makes it with debootstrap.
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS build
RUN --mount=type=bind,source=image,target=/mnt/image \
    sh /mnt/image/debian-install.sh python3 python3-venv
# Two virtualenvs on Debian's Python 3.11: /opt/build holds pip and setuptools (to build
# the wheel), /opt/clusterhealth only what runs (no pip), copied into the final stage.
RUN python3 -m venv /opt/build && python3 -m venv --without-pip /opt/clusterhealth
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    SOURCE_DATE_EPOCH=315532800
COPY image/requirements.lock image/build-requirements.lock /locks/
# Every package from PyPI is checked against the locks' sha256 hashes (`make lock`).
RUN /opt/build/bin/pip install -q --require-hashes --no-deps -r /locks/build-requirements.lock
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core core
COPY agent agent
COPY remedy remedy
COPY mci-provider mci-provider
COPY controlplane controlplane
COPY cli cli
RUN /opt/build/bin/pip wheel -q --no-build-isolation --no-deps --wheel-dir /wheels . \
 && /opt/build/bin/pip --python /opt/clusterhealth/bin/python install -q --require-hashes \
      --only-binary=:all: --no-deps -r /locks/requirements.lock \
 && /opt/build/bin/pip --python /opt/clusterhealth/bin/python install -q --no-index --no-deps \
      /wheels/clusterhealth-*.whl \
 && /opt/build/bin/pip --python /opt/clusterhealth/bin/python check

FROM ${BASE}
RUN --mount=type=bind,source=image,target=/mnt/image \
    sh /mnt/image/debian-install.sh python3
COPY --from=build /opt/clusterhealth /opt/clusterhealth
# The user the charts run as (runAsUser 65532), with a name and a home.
RUN echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'nonroot:x:65532:' >> /etc/group \
 && mkdir -p /home/nonroot && chown 65532:65532 /home/nonroot
ENV PATH=/opt/clusterhealth/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /home/nonroot
USER 65532:65532
LABEL org.opencontainers.image.title=clusterhealth \
      org.opencontainers.image.source=https://github.com/clusterhealth/clusterhealth \
      org.opencontainers.image.licenses=Apache-2.0
ENTRYPOINT []
CMD ["python", "-m", "clusterhealth_agent", "--help"]
