// Command idemwork is a terminal workbench for idempotent writes over PostgreSQL.
package main

import (
	"os"

	"idemwork/cli"
)

func main() { os.Exit(cli.Main()) }
