#!/usr/bin/env bash
# Installs what the Workers tests need, Miniflare and the workerd binary it brings, at the
# versions package-lock.json pins, into a cache directory: $DUILIE_MINIFLARE_DIR, by default
# ${XDG_CACHE_HOME:-~/.cache}/duilie/miniflare. It does nothing when that directory already
# holds this lock's packages, so .ci/run calls it every time. Needs node (20.18 or later) and npm.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${DUILIE_MINIFLARE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/duilie/miniflare}
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [[ -f $dir/lock.sha256 && $(<"$dir/lock.sha256") == "$want" && -x $dir/node_modules/workerd/bin/workerd ]]; then
	exit 0
fi
for tool in node npm; do
	command -v "$tool" >/dev/null || { echo "install.sh: $tool is needed to install Miniflare for the Workers tests" >&2; exit 69; }
done
rm -rf "$dir"
mkdir -p "$dir"
cp "$here/package.json" "$here/package-lock.json" "$dir/"
# No install scripts: workerd's binary comes in its platform package, and sharp (for Miniflare's
# image binding) is not used.
(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
"$dir/node_modules/workerd/bin/workerd" --version >/dev/null
echo "$want" >"$dir/lock.sha256"
echo "install.sh: Miniflare $(node -p 'require(process.argv[1]).version' "$dir/node_modules/miniflare/package.json") in $dir"
