package storm_test

import (
	"context"
	"fmt"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// A live display consumes events while the storm runs; the channel is the caller's, so it
// closes it after Run returns (Run has delivered every event by then). Here 40 requests on one
// key from two processes released together: one executes, the others replay or join its
// result, and the verdict is read from the database.
func ExampleRun() {
	db, drop := testdb.ForExample(testdb.Options{MaxConns: 16})
	defer drop()
	// The process's kernel, e.g. from the CLI or the TUI.
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	spec := stormtypes.Spec{
		Op:     stormtypes.OpCreate,
		Create: model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "k-1", Title: "t"},
		N:      40, Processes: 2, Share: true,
	}
	events := make(chan stormtypes.Event, 64)
	done := make(chan map[string]int)
	go func() {
		counts := map[string]int{}
		for ev := range events {
			if ev.Succeeded() {
				counts["answered"]++ // a display redraws on a tick, not per event
			}
		}
		done <- counts
	}()
	sum, err := storm.Run(context.Background(), storm.Env{Kernel: k, DSN: db.DSN}, spec, events)
	close(events)
	counts := <-done
	if err != nil {
		fmt.Println("storm:", err)
		return
	}
	fmt.Println("answered:", counts["answered"])
	fmt.Println("executed:", sum.Outcomes["EXECUTED"])
	fmt.Println("the database agrees:", sum.Verified.Agrees)
	// Output:
	// answered: 40
	// executed: 1
	// the database agrees: true
}
