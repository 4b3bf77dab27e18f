// Package stormrows holds the reads a storm's verdict is made of (package storm): a key's row
// and what it wrote since the storm began, the app's sessions and blockers on the server, and
// the count of a service's rows for the generic HTTP storm; and the cancel a storm sends to its
// own statements when it stops.
package stormrows
