#!/usr/bin/env bash
# Lints the OpenAPI document of the platform API (GET /openapi.json) with
# Redocly CLI, pinned in .ci/openapi-lint/package-lock.json, under
# .ci/openapi-lint/redocly.yaml: any problem fails. The document comes
# from `kiln openapi`, the builder the server uses; no server is started.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.ci/openapi-lint
doc=$(mktemp -d)/openapi.json
trap 'rm -rf "$(dirname "$doc")"' EXIT
go run -trimpath ./cmd/kiln openapi --base-url https://127.0.0.1:8443 --out "$doc"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
	"$dir/node_modules/.bin/redocly" lint --config "$dir/redocly.yaml" "$doc"
