// Package cli wires the command line (cobra): flags and config select the database, commands
// call into kernel, idem, store and storm, and results print as text or as exactly one JSON
// object with the exit codes of SPEC §10.2 (0 ok, 2 usage, 3 rejected, 4 internal).
package cli
