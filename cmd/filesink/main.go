package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `filesink moves records from a replayable source (files, Kafka) into part files,
S3 objects or MySQL rows, exactly once, or to an HTTP endpoint, at least once
(with idempotency keys) or at most once.

Usage:
  filesink run    --source URI --sink URI [flags]   run a job; after a crash, run it again to resume
  filesink verify --sink URI [--state DIR]          check the output against the checkpoint records
  filesink state  --state DIR                       print the checkpoint records
  filesink uploads list|abort --sink s3://B/P       show or abort a sink's incomplete uploads
  filesink xa list|commit|rollback --sink mysql://DSN
                                                    show or resolve a MySQL sink's prepared XA branches
  filesink help                                     this text

Run "filesink COMMAND --help" for the flags of a command.
`

// exitUsage is the exit code for bad flags.
const exitUsage = 2

func main() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	os.Exit(runMain(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, signals()))
}

// signals delivers SIGTERM and SIGINT: the first asks for a graceful stop,
// the second aborts.
func signals() <-chan os.Signal {
	c := make(chan os.Signal, 2)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	return c
}

func runMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, sig <-chan os.Signal) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(ctx, args[1:], stdin, stderr, sig)
	case "verify":
		err = cmdVerify(ctx, args[1:], stdout, stderr)
	case "state":
		err = cmdState(ctx, args[1:], stdout, stderr)
	case "uploads":
		err = cmdUploads(ctx, args[1:], stdout, stderr)
	case "xa":
		err = cmdXA(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "filesink: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	var ec exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ec):
		if ec.msg != "" {
			fmt.Fprintln(stderr, "filesink:", ec.msg)
		}
		return ec.code
	default:
		fmt.Fprintln(stderr, "filesink:", oneLine(err.Error()))
		return 1
	}
}

// exitError carries an exit code other than 1.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

// newFlagSet returns a flag set whose errors are returned, not printed twice.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: filesink %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return exitError{code: exitUsage}
	}
	if fs.NArg() > 0 {
		return usageError("%s: unexpected argument %q (flags start with --)", fs.Name(), fs.Arg(0))
	}
	return nil
}
