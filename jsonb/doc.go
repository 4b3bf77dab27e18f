// Package jsonb is idemwork's one JSON boundary. Every JSON value that crosses into the
// product — a record payload, a feature input, a request body, a stored envelope — is decoded
// once here, with a maintained decoder (go-json-experiment's jsontext, the implementation of the
// standard library's encoding/json/v2), and rendered in one canonical form: exactly the text
// PostgreSQL's jsonb prints for the value (object keys shorter first, then bytewise; ", " and
// ": " between tokens; numbers as numeric_out writes them, 1e3 as 1000 and 1.0 as 1.0; strings
// escaped as escape_json does). What is fingerprinted, stored and returned are those bytes, so a
// first response and a replay read back from jsonb are byte for byte the same.
//
// Duplicate object names, invalid UTF-8, lone UTF-16 surrogate escapes, the NUL character and
// numbers PostgreSQL's numeric cannot hold are rejected with an *Error naming the place, never
// replaced or resolved "last wins". A differential test against a real PostgreSQL
// (SELECT $1::jsonb::text) pins the rendering.
package jsonb
