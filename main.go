// Command idemwork is a terminal workbench for idempotent writes over PostgreSQL.
package main

import (
	"os"

	"github.com/idemwork/idemwork/cli"
)

func main() { os.Exit(cli.Main()) }
