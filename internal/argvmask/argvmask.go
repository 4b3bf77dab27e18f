// Package argvmask hides secrets given on the command line from other local users (ps,
// /proc/PID/cmdline) as early as a Go program can: in its package initializer.
//
// A secret on the command line is readable by every local user for as long as it stays in the
// process's argument block. idemwork takes secrets from the environment or a file and passes
// them to its own children that way; when a user passes one on the command line anyway, it is
// overwritten in place with 'x' (as the mysql client does with -p) and the command warns. Done
// in main, that left it readable for the whole start-up — the runtime and every package
// initializer before main (0.3–0.7 s on a loaded machine, most of it initializers of terminal
// and metrics libraries). Go initializes packages in import-path order among those whose imports
// are done (Go 1.21+), and this package imports only os (which sets os.Args in its own
// initializer) and unsafe: it is ready, and runs, right after os, before any library's
// initializer. What remains is the time from exec to the runtime's start and os's initializer.
//
// It keeps no strings import on purpose (strings waits for unicode's initializer): every helper
// below works on bytes.
package argvmask

import (
	"os"
	"unsafe"
)

// original is the command line as given, copied before its secrets were blanked: the process's
// argument block is one per process, so is this copy of it.
var original = Mask(os.Args)

// Args returns the process's arguments as given (secrets included, for the command to parse),
// while os.Args and /proc/PID/cmdline show them blanked.
func Args() []string { return append([]string(nil), original...) }

// Mask returns a copy of args to parse, then overwrites the secrets in args' own memory with
// 'x' (the strings of os.Args point into the process's argument block, which is what
// /proc/PID/cmdline and ps read). The secrets are the values of --token (whole), of --dsn (the
// password: postgres://user:PASSWORD@…, password=…) and of -H/--header when the header is
// Authorization, Proxy-Authorization, Cookie or X-Api-Key. Nothing after "--" is a flag.
func Mask(args []string) []string {
	parsed := make([]string, len(args))
	for i, a := range args {
		parsed[i] = string([]byte(a))
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, at, idx := a, "", 0, i // at: offset of the value within args[idx]
		if eq := indexByte(a, '='); eq >= 0 {
			name, value, at = a[:eq], a[eq+1:], eq+1
		} else {
			if kind(name) == none || i+1 >= len(args) {
				continue
			}
			idx, value = i+1, args[i+1]
			i++
		}
		for _, r := range Spans(name, value) {
			blank(args[idx], at+r[0], at+r[1])
		}
	}
	return parsed
}

type flagKind int

const (
	none   flagKind = iota
	secret          // the whole value is a secret
	dsn             // the value may carry a password
	header          // the value is an HTTP header, secret when its name is
)

func kind(name string) flagKind {
	switch name {
	case "--token":
		return secret
	case "--dsn":
		return dsn
	case "--header", "-H":
		return header
	}
	return none
}

var secretHeaders = []string{"authorization", "proxy-authorization", "cookie", "x-api-key"}

// Spans are the byte ranges of value that are secret, for the flag name.
func Spans(name, value string) [][2]int {
	switch kind(name) {
	case secret:
		return [][2]int{{0, len(value)}}
	case dsn:
		return dsnPasswordSpans(value)
	case header:
		if c := indexByte(value, ':'); c >= 0 {
			h := trimSpace(value[:c])
			for _, s := range secretHeaders {
				if equalFold(h, s) {
					return [][2]int{{c + 1, len(value)}}
				}
			}
		}
	}
	return nil
}

// dsnPasswordSpans finds the password of a URL (postgres://user:PASSWORD@host, ?password=…) or
// of a key=value string (password=…).
func dsnPasswordSpans(dsn string) [][2]int {
	var out [][2]int
	if sep := index(dsn, "://"); sep >= 0 && (equalFold(dsn[:sep], "postgres") || equalFold(dsn[:sep], "postgresql")) {
		base := sep + len("://")
		authority := dsn[base:]
		for i := 0; i < len(authority); i++ {
			if c := authority[i]; c == '/' || c == '?' || c == '#' {
				authority = authority[:i]
				break
			}
		}
		if at := lastIndexByte(authority, '@'); at >= 0 {
			if c := indexByte(authority[:at], ':'); c >= 0 {
				out = append(out, [2]int{base + c + 1, base + at})
			}
		}
	}
	const key = "password="
	for from := 0; from+len(key) <= len(dsn); from++ {
		if !equalFold(dsn[from:from+len(key)], key) {
			continue
		}
		start := from + len(key)
		end := start
		for end < len(dsn) && dsn[end] != '&' && dsn[end] != ' ' && dsn[end] != '\t' {
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

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func lastIndexByte(s string, c byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func index(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// equalFold compares ASCII case-insensitively (every name compared here is ASCII).
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
