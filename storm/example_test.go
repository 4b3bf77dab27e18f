package storm_test

import (
	"context"
	"fmt"

	"idemwork/kernel"
	"idemwork/storm"
)

// A live display consumes events while the storm runs; the channel is the caller's, so it
// closes it after Run returns (Run has delivered every event by then).
func ExampleRun() {
	var k *kernel.Kernel // the process's kernel, e.g. from the CLI or the TUI
	spec := storm.Spec{
		Op:     storm.OpCreate,
		Create: kernel.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "k-1", Title: "t"},
		N:      400, Processes: 4, Share: true,
	}
	events := make(chan storm.Event, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		counts := map[string]int{}
		for ev := range events {
			counts[ev.Outcome]++ // redraw on a tick, not per event
		}
	}()
	sum, err := storm.Run(context.Background(), storm.Env{Kernel: k, DSN: "postgres://…"}, spec, events)
	close(events)
	<-done
	if err != nil {
		fmt.Println("storm:", err)
		return
	}
	fmt.Println(sum.Outcomes["EXECUTED"], sum.Verified.Agrees)
}
