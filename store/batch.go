package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/idem"
)

// Batch is the writes of one transaction, queued in order and sent together in one round trip
// with the statement that ends the transaction (TxBatch sends them with COMMIT). Nothing is sent
// while they are queued, so a write may be queued only where nothing later in the transaction
// depends on it having reached the server; the guarded statements (UpdateRecordGuarded, the
// runner's success update) make the server itself fail the transaction when their row is not
// there, before the COMMIT behind them.
//
// A write's arguments are encoded when it is queued: copied into values nothing else refers to,
// so changing a record, a pointer or a payload's bytes after the call changes nothing that is
// sent. Each write keeps the step of the commit unit it belongs to ("record", "audit"…): when the
// server refuses it, the transaction fails with an *idem.StepError naming that step.
//
// The zero value is an empty batch. A Batch is not safe for concurrent use.
type Batch struct {
	writes []queuedWrite
	// err is the first write whose arguments could not be encoded: the batch fails with it
	// when sent, before anything reaches the server.
	err error
	// own holds the copies of the JSON documents the writes carry: a few allocations a batch
	// rather than two a document.
	own arena
}

// arena is where a batch copies the JSON documents its writes carry. A slab that fills is
// replaced, never grown in place, so a copy handed out stays where it is (and what it holds).
type arena struct {
	bytes []byte
}

// json is a copy of v, its capacity its length, so nothing appended to it reaches the arena.
func (a *arena) json(v json.RawMessage) json.RawMessage {
	if cap(a.bytes)-len(a.bytes) < len(v) {
		a.bytes = make([]byte, 0, max(1024, 2*cap(a.bytes), len(v)))
	}
	start := len(a.bytes)
	a.bytes = append(a.bytes, v...)
	return json.RawMessage(a.bytes[start:len(a.bytes):len(a.bytes)])
}

// queuedWrite is one write waiting in a batch.
type queuedWrite struct {
	step string
	// what prefixes the error of the statement ("insert record").
	what string
	// guard, when set, is returned if the statement fails with division_by_zero: the statement
	// is written to divide by its own row count, so the server fails it (and with it the
	// transaction, before any COMMIT queued behind it) when the expected row is not there.
	guard error
	sql   string
	args  []any
}

// BatchWrite is a write Queue adds to a batch: its statement, and how its failure reads. Named
// fields, not three positional strings a caller could swap without the compiler noticing.
type BatchWrite struct {
	// Step names the part of the commit unit the write belongs to: its error is that step's.
	Step string
	// What prefixes the statement's errors ("insert record").
	What string
	// Guard, when set, is returned if the statement fails with division_by_zero (a statement
	// written as "WITH u AS (… RETURNING 1) SELECT 1 / count(*) FROM u" fails that way when no
	// row matched).
	Guard error
	SQL   string
}

// Queue adds the write w to the batch, with its arguments.
func (b *Batch) Queue(w BatchWrite, args ...any) {
	b.queue(w.Step, w.What, w.Guard, w.SQL, append([]any(nil), args...))
}

// queue is Queue for args the batch may keep and encode in place (the repositories' own lists).
func (b *Batch) queue(step, what string, guard error, sql string, args []any) {
	if err := b.own.encode(args); err != nil {
		if b.err == nil {
			b.err = &idem.StepError{Step: step, Err: fmt.Errorf("%s: %w", what, err)}
		}
		return
	}
	if b.writes == nil {
		b.writes = make([]queuedWrite, 0, 8) // a feature run's commit unit queues 5
	}
	b.writes = append(b.writes, queuedWrite{step: step, what: what, guard: guard, sql: sql, args: args})
}

// QueueIn moves the queued writes into tx's queue (idem.Tx.Queue): they travel, in order, with
// the runner's success row and COMMIT, and a write the server refuses fails the call as its
// step's *idem.StepError. A write whose arguments could not be encoded fails it here.
//
// In the work of an idem.RunAhead call (tx.HeldBy), the writes travel in the reservation's own
// round trip, whatever became of it: each goes as its held form (heldWrites), which does
// nothing unless this transaction inserted the key's reservation. A write without one fails the
// call here, before anything is sent.
func (b *Batch) QueueIn(tx *idem.Tx) error {
	if b.err != nil {
		return b.err
	}
	_, key, held := tx.HeldBy()
	for i := range b.writes {
		w := &b.writes[i]
		if !held {
			tx.Queue(w.sql, w.args...).Fn = w.read
			continue
		}
		sql, ok := heldWrites[w.sql]
		if !ok {
			return &idem.StepError{Step: w.step, Err: fmt.Errorf("%s: this write cannot travel ahead of its reservation", w.what)}
		}
		tx.Queue(sql, append(w.args, key)...).Fn = w.read
	}
	return nil
}

// read reads the write's result from a batch: its failure is its step's.
func (w *queuedWrite) read(br pgx.BatchResults) error {
	if _, err := br.Exec(); err != nil {
		return &idem.StepError{Step: w.step, Err: stmtError(w.what, w.guard, err)}
	}
	return nil
}

// Len is how many writes are queued.
func (b *Batch) Len() int { return len(b.writes) }

// Steps are the steps of the queued writes, in order.
func (b *Batch) Steps() []string {
	out := make([]string, len(b.writes))
	for i, w := range b.writes {
		out[i] = w.step
	}
	return out
}

// encode replaces each of args by a value that shares nothing with the caller's: a pointer
// becomes the value it points to now (NULL for nil) — sent alike, and pgx no longer dereferences
// it by reflection, allocating, on every send — a JSON document a copy of its bytes. A type
// outside this list is an error rather than a reference kept by accident.
func (a *arena) encode(out []any) error {
	for i, v := range out {
		switch v := v.(type) {
		case nil, string, bool, int, int32, int64, time.Time:
		case *string:
			out[i] = valueOf(v)
		case *int:
			out[i] = valueOf(v)
		case json.RawMessage:
			// json.RawMessage, never []byte: pgx's exec and simple_protocol modes send a []byte as
			// bytea, and a json column then refuses it.
			if v != nil {
				out[i] = a.json(v)
			} else {
				out[i] = nil
			}
		default:
			return fmt.Errorf("argument %d: a %T cannot be queued (encode it as a plain value first)", i+1, v)
		}
	}
	return nil
}

// valueOf is *p (nil for nil: NULL), in an interface.
func valueOf[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// heldWrites are the held forms of the writes a create queues (idem.RunAhead): each INSERT …
// VALUES (…) as INSERT … SELECT … WHERE <the reservation is this transaction's>, its last
// argument the key (the owner is every one of these writes' $1: a row of the key's owner). The
// rows they write, digests included, are the same bytes; behind a reservation that lost they
// write nothing (INSERT 0 0).
var heldWrites = map[string]string{
	insertRecordSQL:   heldInsert(insertRecordSQL, 9),
	insertRevisionSQL: heldInsert(insertRevisionSQL, 6),
	insertAuditSQL:    heldInsert(insertAuditSQL, 10),
}

// heldInsert is the held form of insert (an INSERT … VALUES (…) of one row with n arguments):
// its key argument is $n+1.
func heldInsert(insert string, n int) string {
	i := strings.LastIndex(insert, "VALUES (")
	if i < 0 || !strings.HasSuffix(insert, ")") {
		panic("store: not an INSERT … VALUES (…): " + insert)
	}
	values := insert[i+len("VALUES (") : len(insert)-1]
	return insert[:i] + "SELECT " + values + "\n\t\tWHERE " + idem.HeldGuard("idempotency_record", 1, n+1)
}
