#!/usr/bin/env bash
# Regenerates passwords.txt (and its licence) beside this script from the
# pinned npm package @zxcvbn-ts/language-common. Run from anywhere inside
# the repository; `go generate ./fhirserver/auth` calls it. Needs npm and
# the network; the output is committed, so builds never do.
set -euo pipefail

ZXCVBN_TS_COMMON_VERSION=4.1.3
# Subresource integrity of the package tarball, as npm reports it
# (npm view @zxcvbn-ts/language-common@$ZXCVBN_TS_COMMON_VERSION dist.integrity).
ZXCVBN_TS_COMMON_INTEGRITY='sha512-g2bg4skmlJG9aJqC/nWziZzgYpSe/f3rKeGobrkdFiOrfZVFqqzUgC6BUQWuX54Sua9j0Jxxt+1bf4f/Mal1Kg=='
# auth.MinPasswordLength: shorter entries are refused by the length rule
# already (a test checks that the two agree).
MIN_LENGTH=12

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm pack --silent "@zxcvbn-ts/language-common@${ZXCVBN_TS_COMMON_VERSION}" >/dev/null)
tarball="$tmp/zxcvbn-ts-language-common-${ZXCVBN_TS_COMMON_VERSION}.tgz"

got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 | tr -d '\n')"
if [[ "$got" != "$ZXCVBN_TS_COMMON_INTEGRITY" ]]; then
	echo "gen.sh: integrity mismatch for $(basename "$tarball"): got $got" >&2
	exit 1
fi

tar -xzf "$tarball" -C "$tmp"
cd "$repo"
go run ./fhirserver/auth/commonpasswords/gen -src "$tmp/package/src/passwords.json" \
	-license "$tmp/package/LICENSE.txt" -source "@zxcvbn-ts/language-common@${ZXCVBN_TS_COMMON_VERSION}" \
	-min "$MIN_LENGTH" -out "$here"
