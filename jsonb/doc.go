// Package jsonb writes PostgreSQL's canonical jsonb text: exactly what jsonb stores and prints
// for a value (object keys shorter first, then bytewise; ", " and ": " between tokens; numbers
// as numeric_out writes them, 1e3 as 1000 and 1.0 as 1.0; strings escaped as escape_json does).
// What is fingerprinted, stored and returned are those bytes, so a first response and a replay
// read back from jsonb are byte for byte the same. A differential test against a real
// PostgreSQL (SELECT $1::jsonb::text) pins the rendering.
//
// Canonical reads its input with json v2's jsontext (go-json-experiment, the implementation of
// the standard library's encoding/json/v2) and refuses what jsonb cannot hold or the boundary
// will not resolve — a duplicate object name, invalid UTF-8, a lone UTF-16 surrogate escape, the
// NUL character, a number PostgreSQL's numeric cannot hold, and past its Limits, depth and size
// — with an *Error naming the place. Explain words json v2's own decoding errors the same way,
// for what is decoded into Go values with json v2 (request bodies, stored envelopes).
package jsonb
