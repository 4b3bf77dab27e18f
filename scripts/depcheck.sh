#!/usr/bin/env bash
# depcheck: the dependency arrows of docs/conventions.md ("Layout", drawn in README.md's
# Architecture) that `go list -deps` can check. Dependencies point down; an engine never reaches for an adapter or the configuration, and the entry points
# are imported by nobody below them. Run by `make lint`; exits 1 naming each arrow that points the
# wrong way.
set -euo pipefail
GO=${GO:-go}
mod=$($GO list -m)
fail=0

# The module's import graph, from one go list (each call loads the packages anew, a second or
# more here, and the checks below ask about some fifty packages): a line per package of ./...
# — its path, what it imports, and everything it depends on (go list's .Deps: the transitive
# imports, what `go list -deps` lists besides the package itself).
graph=$($GO list -f '{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}' ./...)

# field PKG N: field N of PKG's line of the graph (1 the path, 2 its imports, 3 its
# dependencies), one package a line; fails naming PKG when it is no package of the module.
field() {
	awk -F'|' -v p="$1" -v n="$2" '$1 == p { found = 1; if ($n != "") { gsub(/ /, "\n", $n); print $n } }
		END { exit !found }' <<<"$graph" || { echo "depcheck: $1 is no package of $mod" >&2; return 1; }
}

# deps PKG: what `go list -deps PKG` lists: PKG and everything it depends on.
deps() {
	field "$1" 3 || return 1
	echo "$1"
}

# packages PREFIX: the module's packages at PREFIX or under it (what `go list PREFIX/...` lists).
packages() {
	awk -F'|' -v p="$1" '$1 == p || index($1, p "/") == 1 { print $1 }' <<<"$graph"
}

# hits LIST DEP...: for each DEP in turn, the first line of LIST (package paths, one a line) that
# is DEP, or lies under it when DEP is a prefix ending in /...; nothing for a DEP none matches.
# One awk for all the DEPs: a process per DEP and LIST took most of depcheck's minute.
hits() {
	local list=$1
	shift
	awk -v want="$*" 'BEGIN { n = split(want, d, " ") }
		{ line[++m] = $0 }
		END {
			for (i = 1; i <= n; i++) {
				p = d[i]; pre = ""
				if (p ~ /\/\.\.\.$/) pre = substr(p, 1, length(p) - 4)
				for (j = 1; j <= m; j++) {
					l = line[j]
					if ((pre == "" && l == p) || (pre != "" && (l == pre || index(l, pre "/") == 1))) { print l; break }
				}
			}
		}' <<<"$list"
}

# forbid PKG DEP...: PKG (with everything it imports) must not depend on any DEP (a package path,
# or a prefix ending in /...).
forbid() {
	local pkg=$1
	shift
	local list h
	list=$(deps "$pkg")
	while IFS= read -r h; do
		echo "depcheck: $pkg depends on $h (it must not)"
		fail=1
	done < <(hits "$list" "$@")
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
	done < <(awk -F'|' '{ print $1, $2 }' <<<"$graph")
}

# noimport PKG WHY DEP...: PKG itself (not what it imports) must not import any DEP; WHY says
# where what it would import it for belongs.
noimport() {
	local pkg=$1 why=$2
	shift 2
	local imports h
	imports=$(field "$pkg" 2)
	while IFS= read -r h; do
		echo "depcheck: $pkg imports $h ($why)"
		fail=1
	done < <(hits "$imports" "$@")
}

# within PKG ALLOWED...: of this module, PKG (with everything it imports) depends only on the
# ALLOWED packages (paths, or prefixes ending in /...).
within() {
	local pkg=$1
	shift
	local dep list
	list=$(deps "$pkg")
	while read -r dep; do
		[[ $dep == "$mod" || $dep == "$mod"/* ]] || continue
		local ok=0
		for allowed in "$@"; do
			if [[ $allowed == */... ]]; then
				[[ $dep == "${allowed%/...}" || $dep == "${allowed%/...}"/* ]] && ok=1
			else
				[[ $dep == "$allowed" ]] && ok=1
			fi
		done
		if [[ $ok == 0 ]]; then
			echo "depcheck: $pkg depends on $dep (the runner library may use only $*)"
			fail=1
		fi
	done <<<"$list"
}

# The runner library (idem and its subpackages: the middleware, the database-free types) is what
# other services go get: it reaches nothing of the workbench — not the kernel, views, storm, cli
# or tui, nor the store and model those are built on — only the coded errors and the canonical
# JSON it shares with them, and the failed rows that pgx's contract asks of every Query (a leaf
# over pgx, shared with the store).
for p in $(packages "$mod/idem"); do
	within "$p" "$mod/idem/..." "$mod/apperr" "$mod/jsonb" "$mod/internal/failedpgx"
done

# SQL lives in store: the kernel, what is built on it (verify, the key view, the demos), the
# outbox worker and the storm engine call store's functions and hold no driver of their own.
for p in kernel verify inspect demo outbox storm; do
	noimport "$mod/$p" "its SQL belongs in $mod/store" "github.com/jackc/pgx/v5/..." "database/sql" "github.com/jmoiron/sqlx"
done

# The store is split by job: the core package (store) is the session — the pool, its policy,
# transactions and the batch, error translation, the names of rows — and each job lies below
# the kernel in a package of its own (store/<job>) built on it. The core imports none of them;
# no job reaches anything above the store (the kernel, the runner library idem, verify, the
# adapters, the configuration, the views), so none can learn the envelope's layout: where a
# result keeps what it references is handed in by the caller that owns the format. Jobs do not
# import each other, except verifyrows, which reads key rows with replay's scanners.
storejobs=$(packages "$mod/store" | grep -v "^$mod/store\$")
# shellcheck disable=SC2086 # one package path a word
forbid "$mod/store" $storejobs
for j in $storejobs; do
	siblings=()
	for k in $storejobs; do
		[[ $k == "$j" ]] && continue
		[[ $j == "$mod/store/verifyrows" && $k == "$mod/store/replay" ]] && continue
		siblings+=("$k")
	done
	forbid "$j" "$mod/kernel" "$mod/verify" "$mod/inspect" "$mod/demo" "$mod/outbox" "$mod/storm" "$mod/httpapi" \
		"$mod/wire" "$mod/cli" "$mod/config" "$mod/tui" "$mod/views" "$mod/internal/workbench" "${siblings[@]}"
	# The runner library's seam types (the replay's parameters and key row) are the replay's to use.
	[[ $j == "$mod/store/replay" ]] || noimport "$j" "a job of the store reads rows, the runner's seam is the core's" "$mod/idem"
	noimport "$j" "the envelope's layout is handed in by its owner" "$mod/idem/idemtype"
done
noimport "$mod/store" "the envelope's layout is handed in by its owner" "$mod/idem/idemtype"
# The core store imports idem for its driver seam (idem.Driver, StepError, CommitAnswered) only:
# no Go file of the store names where the envelope keeps a member, nor reads one in SQL.
if h=$(grep -rnE "idem\.ResultPath|->>? *'(policy|result)'" --include='*.go' --exclude='*_test.go' store | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//'); then
	echo "depcheck: the store knows the envelope's layout (its owner hands paths in):"
	echo "$h"
	fail=1
fi

# The kernel is the engine: what a client receives (statuses, Location, headers, exit codes) is
# wire's and the adapters', and verify, the key view (inspect) and the guided demos are built on
# the kernel, never the other way round; the outbox worker is the host's to run (the demo drives
# one of its own).
forbid "$mod/kernel" "$mod/wire" "$mod/httpapi" "$mod/outbox" "$mod/verify" "$mod/inspect" "$mod/demo"
noimport "$mod/kernel" "a status or a header is $mod/wire's" "net/http"
# verify, inspect and demo are engines below the adapters: none reaches the CLI, the HTTP
# adapter, the shell, the views or their wiring, nor the configuration. The key view judges a
# key's lives by verify's rules, so inspect lies above verify; verify knows nothing of it.
for p in verify inspect demo; do
	forbid "$mod/$p" "$mod/cli" "$mod/httpapi" "$mod/tui" "$mod/views" "$mod/internal/workbench" "$mod/config"
done
forbid "$mod/verify" "$mod/inspect" "$mod/demo"

# The storm engine fires at a kernel or at an HTTP client of its own; the host wires the server.
forbid "$mod/storm" "$mod/httpapi" "$mod/config"
# The views, the shell and its shared context read and write through the small interfaces each
# view declares, implemented over the store and the kernel in internal/workbench and wired in
# cli: none of them (nor the plain data they use, model and storm/stormtypes) reaches the
# database, directly or through anything it imports (kernel, idem, storm, outbox, wire).
for pkg in tui views internal/uictx model storm/stormtypes; do
	forbid "$mod/$pkg" "$mod/store" "github.com/jackc/pgx/v5/..."
done
# The program context the shell and the views share lies below both: it imports neither, and
# the views never import the shell. The storm's plain data lies below the engine.
forbid "$mod/internal/uictx" "$mod/tui" "$mod/views"
forbid "$mod/views" "$mod/tui"
forbid "$mod/storm/stormtypes" "$mod/storm"
# The store-backed readers and writers are wired by cli (and the TUI's test harness) only.
only "$mod/internal/workbench" "$mod/cli" "$mod/internal/tuitest"
# Nothing imports the entry points: main wires cli, and cli starts the TUI.
only "$mod/cli" "$mod"
only "$mod/tui" "$mod/cli"

exit $fail
