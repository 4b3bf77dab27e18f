// Package failover is the exactly-once-across-failover scenario (SPEC §13): keyed HTTP creates
// and same-key storms sent through several `idemwork serve` processes while faults move or kill
// the primary, then every key retried once the new primary answers, then what the database
// holds compared with every answer the clients got.
//
// It counts what a client of a highly available database cares about: keys whose work was
// executed twice (two EXECUTED answers naming different records, or two records of one key),
// acknowledged keys lost (an answer named a record the database no longer has), partial rows (a
// record whose key is not SUCCEEDED, a key left PROCESSING) and keys no retry could settle. With
// synchronous replication (pg_auto_failover) each must be 0; with an asynchronous standby
// promoted after its primary died, acknowledged commits the standby never received are gone,
// and a retry executes their keys a second time.
//
// The scenario drives servers it is given and faults it is handed as functions: the tests start
// the formation (internal/testdb) and the `serve` processes.
package failover
