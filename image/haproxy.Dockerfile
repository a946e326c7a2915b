# syntax=docker/dockerfile:1
# HAProxy from Debian's package, for the MCI provider chart's sidecar
# (charts/mci-provider, haproxy.sidecar). Built like ../Dockerfile, by `make image`,
# from the repository's root as context: docker build -f image/haproxy.Dockerfile .
ARG BASE=debian:bookworm-slim

FROM ${BASE}
RUN --mount=type=bind,source=image,target=/mnt/image \
    sh /mnt/image/debian-install.sh haproxy
# The user the chart runs it as (runAsUser 65532), with a name and a home.
RUN echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'nonroot:x:65532:' >> /etc/group \
 && mkdir -p /home/nonroot && chown 65532:65532 /home/nonroot
WORKDIR /home/nonroot
USER 65532:65532
LABEL org.opencontainers.image.title=clusterhealth-haproxy \
      org.opencontainers.image.licenses=GPL-2.0-or-later
ENTRYPOINT []
CMD ["haproxy", "-vv"]
