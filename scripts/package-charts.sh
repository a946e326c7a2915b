#!/usr/bin/env bash
# Package every chart into a Helm chart repository folder (docs/operations.md, "Charts from a
# repository"): DEST/<chart>-<version>.tgz and DEST/index.yaml. Each package carries its
# dependencies (the CRDs chart is in charts/ of the three that depend on it), so nothing
# needs `helm dependency build`. With URL, index.yaml points at URL (where DEST is served).
#   scripts/package-charts.sh DEST [URL]        HELM=/path/to/helm to choose the binary
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: scripts/package-charts.sh DEST [URL]}
url=${2:-}
helm=${HELM:-helm}
mkdir -p "$dest"
for chart in clusterhealth-crds agent remedy mci-provider controlplane; do
  # helm says so when it follows the link to the CRDs chart: expected, not worth a line
  "$helm" package "charts/$chart" --destination "$dest" 2> >(grep -v 'found symbolic link' >&2)
done
if [ -n "$url" ]; then
  "$helm" repo index "$dest" --url "$url"
else
  "$helm" repo index "$dest"
fi
echo "chart repository in $dest: $(cd "$dest" && ls ./*.tgz | tr '\n' ' ')"
