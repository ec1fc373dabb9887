#!/usr/bin/env bash
# Vendor the web console's third-party browser assets (no Node build step, no CDN).
#
# Fetches the pinned npm packages with `npm pack` into a temporary directory, copies the
# prebuilt files the console serves into src/vq/web/pages/static/vendor/, and rewrites
# static/vendor/README.md with each package's version, licence and the sha256 of every
# file. Re-run after changing a version below; commit the result (the files ship in the
# wheel). Needs only `npm` (for `npm pack`) and `sha256sum`.
set -euo pipefail

HTMX_VERSION=2.0.11
UPLOT_VERSION=1.6.32
SWAGGER_UI_VERSION=5.35.0

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/src/vq/web/pages/static/vendor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

unpack() { # <package> <version> -> prints the unpacked package directory
  local pkg="$1" version="$2" tgz
  tgz="$(cd "$tmp" && npm pack --silent "$pkg@$version" | tail -n 1)"
  mkdir -p "$tmp/$pkg"
  tar -xzf "$tmp/$tgz" -C "$tmp/$pkg"
  echo "$tmp/$pkg/package"
}

licence_of() { # <package dir>
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["license"])' "$1/package.json"
}

htmx="$(unpack htmx.org "$HTMX_VERSION")"
uplot="$(unpack uplot "$UPLOT_VERSION")"
swagger="$(unpack swagger-ui-dist "$SWAGGER_UI_VERSION")"

mkdir -p "$dest"
install -m 0644 "$htmx/dist/htmx.min.js" "$dest/htmx.min.js"
install -m 0644 "$htmx/LICENSE" "$dest/htmx.LICENSE"
install -m 0644 "$uplot/dist/uPlot.iife.min.js" "$dest/uPlot.iife.min.js"
install -m 0644 "$uplot/dist/uPlot.min.css" "$dest/uPlot.min.css"
install -m 0644 "$uplot/LICENSE" "$dest/uPlot.LICENSE"
install -m 0644 "$swagger/swagger-ui-bundle.js" "$dest/swagger-ui-bundle.js"
install -m 0644 "$swagger/swagger-ui.css" "$dest/swagger-ui.css"
install -m 0644 "$swagger/LICENSE" "$dest/swagger-ui.LICENSE"

sha() { sha256sum "$dest/$1" | cut -d' ' -f1; }

cat >"$dest/README.md" <<EOF
# Vendored browser assets

Copied unmodified from the npm packages by \`scripts/vendor-web-assets.sh\` (which
\`npm pack\`s the pinned versions); no Node build step and no CDN. Re-run that script to
update, then commit the files.

| file | package | version | licence | sha256 |
|---|---|---|---|---|
| htmx.min.js | htmx.org (dist/htmx.min.js) | $HTMX_VERSION | $(licence_of "$htmx") | $(sha htmx.min.js) |
| htmx.LICENSE | htmx.org (LICENSE) | $HTMX_VERSION | $(licence_of "$htmx") | $(sha htmx.LICENSE) |
| uPlot.iife.min.js | uplot (dist/uPlot.iife.min.js) | $UPLOT_VERSION | $(licence_of "$uplot") | $(sha uPlot.iife.min.js) |
| uPlot.min.css | uplot (dist/uPlot.min.css) | $UPLOT_VERSION | $(licence_of "$uplot") | $(sha uPlot.min.css) |
| uPlot.LICENSE | uplot (LICENSE) | $UPLOT_VERSION | $(licence_of "$uplot") | $(sha uPlot.LICENSE) |
| swagger-ui-bundle.js | swagger-ui-dist (the API docs page at /api/v1/docs) | $SWAGGER_UI_VERSION | $(licence_of "$swagger") | $(sha swagger-ui-bundle.js) |
| swagger-ui.css | swagger-ui-dist | $SWAGGER_UI_VERSION | $(licence_of "$swagger") | $(sha swagger-ui.css) |
| swagger-ui.LICENSE | swagger-ui-dist (LICENSE) | $SWAGGER_UI_VERSION | $(licence_of "$swagger") | $(sha swagger-ui.LICENSE) |

Check: \`cd src/vq/web/pages/static/vendor && sha256sum htmx.min.js uPlot.iife.min.js uPlot.min.css swagger-ui-bundle.js swagger-ui.css\`.
EOF
echo "vendored htmx.org@$HTMX_VERSION, uplot@$UPLOT_VERSION and swagger-ui-dist@$SWAGGER_UI_VERSION into $dest"
