package cli

import (
	"strings"
	"unsafe"
)

// Secrets given on the command line are readable by every local user (ps, /proc/PID/cmdline)
// for as long as the process runs. idemwork takes them from the environment or a file
// (IDEMWORK_TOKEN, --token-file, IDEMWORK_DSN) and passes them to its own children that way
// (the job on stdin, the DSN in the environment), never in argv; when a user passes one on the
// command line anyway, hideSecretArgs overwrites it in this process's argument memory at once
// (as the mysql client does with -p), and the command warns.

// secretFlags are the flags whose whole value is a secret.
var secretFlags = map[string]bool{"--token": true}

// dsnFlags are the flags whose value may carry a password (the password alone is hidden).
var dsnFlags = map[string]bool{"--dsn": true}

// headerFlags are the flags whose value is an HTTP header, secret when its name is one of
// secretHeaders.
var headerFlags = map[string]bool{"--header": true, "-H": true}

var secretHeaders = map[string]bool{"authorization": true, "proxy-authorization": true, "cookie": true, "x-api-key": true}

// hideSecretArgs returns a copy of args to parse, then overwrites the secrets in args' own
// memory with 'x' (the strings of os.Args point into the process's argument block, which is
// what /proc/PID/cmdline and ps read). Only call it on os.Args, before anything else read them.
func hideSecretArgs(args []string) []string {
	parsed := make([]string, len(args))
	for i, a := range args {
		parsed[i] = strings.Clone(a)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, inline := strings.Cut(a, "=")
		var at int // offset of the value within its argument
		idx := i
		if !inline {
			if !secretFlags[name] && !dsnFlags[name] && !headerFlags[name] || i+1 >= len(args) {
				continue
			}
			idx, value = i+1, args[i+1]
			i++
		} else {
			at = len(name) + 1
		}
		for _, r := range secretSpans(name, value) {
			blank(args[idx], at+r[0], at+r[1])
		}
	}
	return parsed
}

// secretSpans are the byte ranges of value that are secret, for the flag name.
func secretSpans(name, value string) [][2]int {
	switch {
	case secretFlags[name]:
		return [][2]int{{0, len(value)}}
	case dsnFlags[name]:
		return dsnPasswordSpans(value)
	case headerFlags[name]:
		if h, _, ok := strings.Cut(value, ":"); ok && secretHeaders[strings.ToLower(strings.TrimSpace(h))] {
			return [][2]int{{len(h) + 1, len(value)}}
		}
	}
	return nil
}

// dsnPasswordSpans finds the password of a URL (postgres://user:PASSWORD@host, ?password=…) or
// of a key=value string (password=…).
func dsnPasswordSpans(dsn string) [][2]int {
	var out [][2]int
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql")) {
		authority := rest
		if end := strings.IndexAny(rest, "/?#"); end >= 0 {
			authority = rest[:end]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			if c := strings.IndexByte(authority[:at], ':'); c >= 0 {
				base := len(scheme) + len("://")
				out = append(out, [2]int{base + c + 1, base + at})
			}
		}
	}
	low := strings.ToLower(dsn)
	for from := 0; ; {
		i := strings.Index(low[from:], "password=")
		if i < 0 {
			break
		}
		start := from + i + len("password=")
		end := start
		for end < len(dsn) && !strings.ContainsRune("& \t", rune(dsn[end])) {
			end++
		}
		out = append(out, [2]int{start, end})
		from = end
	}
	return out
}

// blank overwrites s[from:to] with 'x' in place.
func blank(s string, from, to int) {
	if from >= to || to > len(s) {
		return
	}
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	for i := from; i < to; i++ {
		b[i] = 'x'
	}
}
