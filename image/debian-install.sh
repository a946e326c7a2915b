#!/bin/sh
# Install Debian packages into an image, slim: no recommends, no docs, man pages
# or translations (copyright files stay), no apt lists, caches or logs left behind.
# Both Dockerfiles run it in every stage (RUN --mount=type=bind,source=image,...),
# and so does the daemon-less build (clusterhealth_localenv/images.py), which
# executes the same Dockerfiles: one recipe. Usage: debian-install.sh PACKAGE...
set -eu
export DEBIAN_FRONTEND=noninteractive

# What debian:*-slim leaves out, also for the packages installed below.
cat > /etc/dpkg/dpkg.cfg.d/clusterhealth-slim <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
# The same for what the base already holds (a debootstrap base has all of it).
find /usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find /usr/share/doc -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf /usr/share/man/* /usr/share/info/* /usr/share/groff/* /usr/share/lintian/* \
  /usr/share/linda/*
find /usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias \
  -exec rm -rf {} + 2>/dev/null || true

# The base's own packages get the security updates too (both kinds of base).
cat > /etc/apt/sources.list.d/debian.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
rm -f /etc/apt/sources.list
apt-get update -qq
apt-get upgrade -y -qq
apt-get install -y -qq --no-install-recommends "$@"
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/log/apt \
  /var/log/dpkg.log /var/log/alternatives.log /var/cache/ldconfig/aux-cache /tmp/*
