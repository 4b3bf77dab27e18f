// Package stormtypes holds the plain data of a replay storm: its spec, its events, lock samples
// and summary with the verdict, and the pure helpers on them (normalizing a spec, percentiles,
// the order outcomes are shown in). It does not import the database, so the workbench's Storm
// view can use the engine's own types; package storm aliases every one of them.
package stormtypes
