#!/usr/bin/env bash
# depcheck: the dependency arrows of CONVENTIONS.md "Layout" that `go list` can check. Dependencies
# point down; an engine never reaches for an adapter or the configuration, and the entry points
# are imported by nobody below them. Run by `make lint`; exits 1 naming each arrow that points the
# wrong way.
set -euo pipefail
GO=${GO:-go}
mod=$($GO list -m)
fail=0

# forbid PKG DEP...: PKG (with everything it imports) must not depend on any DEP (a package path,
# or a prefix ending in /...).
forbid() {
	local pkg=$1
	shift
	local deps
	deps=$($GO list -deps "$pkg")
	for dep in "$@"; do
		local hit
		if [[ $dep == */... ]]; then
			hit=$(grep -E "^${dep%/...}(/|$)" <<<"$deps" || true)
		else
			hit=$(grep -Fx "$dep" <<<"$deps" || true)
		fi
		if [[ -n $hit ]]; then
			echo "depcheck: $pkg depends on $(head -1 <<<"$hit") (it must not)"
			fail=1
		fi
	done
}

# only PKG IMPORTER...: no package of the module imports PKG except the IMPORTERs.
only() {
	local pkg=$1
	shift
	local p
	while read -r p imports; do
		[[ " $imports " == *" $pkg "* ]] || continue
		local ok=0
		for allowed in "$@"; do [[ $p == "$allowed" ]] && ok=1; done
		if [[ $ok == 0 ]]; then
			echo "depcheck: $p imports $pkg (only $* may)"
			fail=1
		fi
	done < <($GO list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)
}

# imports PKG DEP...: PKG itself (not what it imports) must not import any DEP (a prefix ending
# in /... covers the path and everything under it).
noimport() {
	local pkg=$1
	shift
	local imports
	imports=$($GO list -f '{{join .Imports "\n"}}' "$pkg")
	for dep in "$@"; do
		local hit
		if [[ $dep == */... ]]; then
			hit=$(grep -E "^${dep%/...}(/|$)" <<<"$imports" || true)
		else
			hit=$(grep -Fx "$dep" <<<"$imports" || true)
		fi
		if [[ -n $hit ]]; then
			echo "depcheck: $pkg imports $(head -1 <<<"$hit") (its SQL belongs in $mod/store)"
			fail=1
		fi
	done
}

# SQL lives in store: the kernel, the outbox worker and the storm engine call store's functions
# and hold no driver of their own.
for p in kernel outbox storm; do
	noimport "$mod/$p" "github.com/jackc/pgx/v5/..." "database/sql" "github.com/jmoiron/sqlx"
done

# The storm engine fires at a kernel or at an HTTP client of its own; the host wires the server.
forbid "$mod/storm" "$mod/httpapi" "$mod/config"
# Nothing imports the entry points: main wires cli, and cli starts the TUI.
only "$mod/cli" "$mod"
only "$mod/tui" "$mod/cli"

exit $fail
