#!/usr/bin/env bash
# Install everything clusterhealth needs on a fresh machine, idempotently:
# Debian packages (apt-get update first), a Python virtualenv with the project
# and its dev tools, and the Kubernetes and Karmada binaries (built from the Go
# module proxy, cached in ~/.cache/clusterhealth keyed by version).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
# Debian packages the tests and the demo use (command -> package).
DEBIAN=(
  "make:make"
  "git:git"
  "curl:curl"
  "dnsmasq:dnsmasq-base"   # the real DNS server the agent's tests stop and start
  "promtool:prometheus"    # promtool check/test rules for every alert
  "haproxy:haproxy"        # the real load balancer the MCI provider drives
  "ip:iproute2"            # network namespaces for the MCI tests' backend hosts
  "tinyproxy:tinyproxy"    # the real HTTP CONNECT proxy between clients and API servers
  "debootstrap:debootstrap" # the images' Debian base without a Docker daemon (make image)
  "unshare:util-linux"     # the daemon-less image build's chroot steps run in namespaces
  # Nodes that run containers (clusterhealth_localenv.nodes):
  "containerd:containerd"  # the container runtime (CRI), with ctr and the runc shim
  "runc:runc"
  "nft:nftables"           # kube-proxy's nftables mode
  "iptables:iptables"      # kubelet's and the iptables mode's rules
  "gcc:gcc"                # compiles Kubernetes' pause program, static
)
# Packages told by a file rather than a command (file -> package).
FILES=(
  "/usr/lib/cni/bridge:containernetworking-plugins"         # bridge, host-local, loopback
  "/usr/share/doc/busybox-static:busybox-static"            # the tests' static image
  "/usr/lib/x86_64-linux-gnu/libc.a:libc6-dev"              # a static libc for pause
)

missing=()
for entry in "${DEBIAN[@]}"; do
  cmd=${entry%%:*}; pkg=${entry##*:}
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
for entry in "${FILES[@]}"; do
  file=${entry%%:*}; pkg=${entry##*:}
  [ -e "$file" ] || missing+=("$pkg")
done
if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
if ((${#missing[@]})); then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "bootstrap: Python >= 3.11 is required ($PYTHON is $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi

stamp="$VENV/.installed-$(cat pyproject.toml localenv/pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: creating $VENV and installing Python packages"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  # the product with its dev tools, and the test harness (localenv/, not part of the product)
  "$VENV/bin/pip" install -q -e '.[dev]' -e ./localenv
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
# The packages live in one folder per component (and the harness in localenv/); tools
# that do not run setuptools' import hook (mypy, import-linter) find them through this .pth.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
: > "$site/clusterhealth-sources.pth"
for root in core agent remedy mci-provider controlplane cli localenv; do
  echo "$PWD/$root" >> "$site/clusterhealth-sources.pth"
done

# Go is needed to build kube-apiserver, etcd, helm, karmada-aggregated-apiserver
# and karmada-controller-manager (once; then cached, with Karmada's CRD manifests).
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
"$VENV/bin/python" -m clusterhealth_localenv.binaries
