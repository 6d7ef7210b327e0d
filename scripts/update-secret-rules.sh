#!/usr/bin/env bash
# Installs or updates gitleaks' rule set as the user's own secret rules, which
# `gjcfs export --redact` and `gjcfs mount --redact` then apply beside gjcfs's built-in
# ones: the documented update path (README, "Sharing an export"). Not run by CI (it needs
# GitHub); nothing of gitleaks is kept in this repository.
#
# Usage: scripts/update-secret-rules.sh [TAG]
#   TAG: a gitleaks release tag (default: v8.30.1).
# Environment:
#   GJCFS: the gjcfs program to check the file with (default: gjcfs on the PATH).
#   GITLEAKS_CONFIG_URL: where to download from (default: the tag's config/gitleaks.toml on
#     GitHub); a file:// URL works too.
#
# Writes $XDG_CONFIG_HOME/gjcfs/secret-rules.toml (else ~/.config/gjcfs/secret-rules.toml),
# the file gjcfs reads when no --redact-rules names another, after checking that gjcfs reads
# it: a file gjcfs cannot read is not installed, and the rules it leaves out (a regex the
# `regex` crate refuses) are named.
set -euo pipefail

TAG=${1:-v8.30.1}
GJCFS=${GJCFS:-gjcfs}
URL=${GITLEAKS_CONFIG_URL:-https://raw.githubusercontent.com/gitleaks/gitleaks/$TAG/config/gitleaks.toml}
CONFIG=${XDG_CONFIG_HOME:-$HOME/.config}
DEST=$CONFIG/gjcfs/secret-rules.toml

die() {
	echo "update-secret-rules: error: $*" >&2
	exit 1
}

command -v "$GJCFS" >/dev/null || die "$GJCFS not found (set GJCFS to the gjcfs program)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

{
	echo "# gitleaks' rule set ($TAG), from $URL"
	echo "# (MIT licence, see https://github.com/gitleaks/gitleaks), installed by gjcfs's"
	echo "# scripts/update-secret-rules.sh; run it again to update."
	curl -fsSL "$URL" || die "cannot download $URL"
} >"$tmp/rules.toml"

# An export of an empty store reads the rules, names the sets it applies and warns of any
# rule left out, and fails on a file that holds no rules.
mkdir "$tmp/store"
"$GJCFS" export --all --session-dir "$tmp/store" --allow-empty --out "$tmp/out" \
	--redact --redact-rules "$tmp/rules.toml" 2>"$tmp/check" ||
	die "gjcfs cannot read the rules of $URL: $(cat "$tmp/check")"
grep -E 'redacting secrets|left out' "$tmp/check" | sed "s#$tmp/rules.toml#$TAG#" >&2 || true

mkdir -p "$(dirname "$DEST")"
mv "$tmp/rules.toml" "$DEST"
echo "update-secret-rules: gitleaks $TAG's rules installed in $DEST"
