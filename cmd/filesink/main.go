package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
)

const usage = `filesink moves records from a replayable source (files, Kafka) into part files,
S3 objects, Apache Iceberg tables or MySQL rows, exactly once, or to an HTTP
endpoint, at least once (with idempotency keys) or at most once.

Usage:
  filesink run    --source URI --sink URI [flags]   run a job; after a crash, run it again to resume
  filesink verify --sink URI [--state DIR]          check the output against the checkpoint records
  filesink state  --state DIR                       print the checkpoint records (an Iceberg sink:
                                                    --sink iceberg://NS.TABLE --warehouse LOCATION)
  filesink compact --sink iceberg://NS.TABLE --warehouse LOCATION
                                                    rewrite an Iceberg table's small data files into large ones
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
		err = cmdRun(ctx, args[1:], stdin, stdout, stderr, sig)
	case "verify":
		err = cmdVerify(ctx, args[1:], stdout)
	case "state":
		err = cmdState(ctx, args[1:], stdout, stderr)
	case "uploads":
		err = cmdUploads(ctx, args[1:], stdout, stderr)
	case "compact":
		err = cmdCompact(ctx, args[1:], stdout, sig)
	case "xa":
		err = cmdXA(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "filesink: unknown command %q; see 'filesink help'\n", args[0])
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
			fmt.Fprintln(stderr, errorLine(ec.msg))
		}
		return ec.code
	default:
		fmt.Fprintln(stderr, errorLine(err.Error()))
		return 1
	}
}

// errorLine is the one line an error is printed as: "filesink: " and the
// message, without a second "filesink: " in front of a message of package
// filesink.
func errorLine(msg string) string {
	return "filesink: " + strings.TrimPrefix(oneLine(msg), "filesink: ")
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

// inCommand puts "cmd: " in front of the message of a usage error that
// does not name its command yet (one made by code that several commands
// share); other errors are returned as they are.
func inCommand(cmd string, err error) error {
	var ec exitError
	if errors.As(err, &ec) && ec.msg != "" && !strings.HasPrefix(ec.msg, cmd+": ") {
		ec.msg = cmd + ": " + ec.msg
		return ec
	}
	return err
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

// newFlagSet returns a flag set whose help (--help, -h) goes to stdout and
// whose parse errors are not printed: parseFlags returns them as one line.
func newFlagSet(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = usageFunc(fs, name, synopsis)
	return fs
}

// usageFunc prints "Usage: filesink CMD SYNOPSIS" and the flags of fs.
func usageFunc(fs *flag.FlagSet, cmd, synopsis string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "Usage: filesink %s %s\n\nFlags:\n", cmd, synopsis)
		fs.PrintDefaults()
	}
}

// parseFlags parses args into fs. --help prints the usage and returns
// flag.ErrHelp; a bad flag is a usage error of one line with a hint,
// never the whole usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	help, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = help
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		help()
		return err
	}
	if err != nil {
		return usageError("%s: %s; see 'filesink %s --help'", fs.Name(), flagErrorText(fs, err), fs.Name())
	}
	if fs.NArg() > 0 {
		return usageError("%s: unexpected argument %q (flags start with --); see 'filesink %s --help'", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// badValueRE matches the flag package's error for a value a flag refused.
var badValueRE = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-(\S+): (.*)$`)

// flagErrorText rewrites an error of the flag package with the flags
// spelled as --name: an unknown flag (with the closest known one), a
// missing value, a refused value and what the flag wants.
func flagErrorText(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("unknown flag --%s%s", name, suggestFlag(name, fs))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("--%s needs a value", name)
	}
	if m := badValueRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid value %s for --%s: want %s", m[1], m[2], wants(fs, m[2], m[3]))
	}
	return msg
}
