package cli

import "github.com/idemwork/idemwork/internal/argvmask"

// Secrets given on the command line are readable by every local user (ps, /proc/PID/cmdline)
// for as long as the process runs. idemwork takes them from the environment or a file
// (IDEMWORK_TOKEN, --token-file, IDEMWORK_DSN) and passes them to its own children that way
// (the job on stdin, the DSN in the environment), never in argv; when a user passes one on the
// command line anyway, package argvmask has overwritten it in this process's argument memory
// before main (in its package initializer, right after os's), and the command warns.

// commandLine is the process's command line as given, secrets included, for the command to
// parse (os.Args shows them blanked).
func commandLine() []string { return argvmask.Args() }
