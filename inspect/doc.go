// Package inspect shows one key of idemwork's own database as the next request with it meets
// it: its row, the result restored as a replay would (read-only), the answer a retry gets now
// (the HTTP shape of package wire), the record as it is, and its lives — every transaction that
// ran under it, judged by verify's rules — told as a verdict in words. It only reads.
package inspect
