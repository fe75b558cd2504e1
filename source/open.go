package source

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// SupportedURIs lists the source URI forms Open accepts, for help texts and
// error messages.
const SupportedURIs = `file://DIR or a plain path DIR (every file under DIR; DIR may also be one file), ` +
	`gen://?count=N[&seed=S&size=B&keys=K&start=RFC3339&step=DURATION] (generator), ` +
	`- or stdin:// (standard input, not replayable)`

// Open opens the source named by uri, resuming at pos (nil or JSON null:
// from the beginning). The forms are:
//
//   - "file://DIR" (or "file:DIR"), or a plain path "DIR": the directory
//     source, NewDir(ctx, DIR, pos, opts...). The text after "file://" is
//     taken literally, without percent-decoding: "file:///in" is "/in",
//     "file://in" is "in".
//   - "gen://?count=N&seed=S&size=B&keys=K&start=RFC3339&step=DURATION" (or
//     "gen:?..."): the generator, NewGenerator(ParseGenQuery(...), pos).
//     count is required.
//   - "-" or "stdin://" (or "stdin:"): standard input, NewReader(os.Stdin,
//     "stdin", opts...). Stdin is not replayable: a non-nil pos is an error
//     matching ErrNotReplayable, and the caller decides whether to start
//     over without it.
//
// Any other "scheme://" is an error matching ErrBadURI that lists the
// supported forms. opts configure the line-reading sources; giving one to
// the generator is an error.
func Open(ctx context.Context, uri string, pos json.RawMessage, opts ...Option) (Source, error) {
	if err := CheckURI(uri); err != nil {
		return nil, err
	}
	switch {
	case uri == "-" || hasScheme(uri, "stdin"):
		if !isNullPosition(pos) {
			return nil, fmt.Errorf("%w: stdin cannot resume from a checkpoint position: "+
				"the records read after that checkpoint were consumed and cannot be read again; "+
				"start without a position to read new input (records since the checkpoint are lost), "+
				"or read from a directory for exactly-once replay", ErrNotReplayable)
		}
		return NewReader(os.Stdin, "stdin", opts...)
	case hasScheme(uri, "gen"):
		cfg, err := ParseGenQuery(strings.TrimPrefix(trimScheme(uri, "gen"), "?"))
		if err != nil {
			return nil, err
		}
		if _, err := buildOptions("gen", opts); err != nil {
			return nil, err
		}
		return NewGenerator(cfg, pos)
	case hasScheme(uri, "file"):
		return NewDir(ctx, trimScheme(uri, "file"), pos, opts...)
	default:
		return NewDir(ctx, uri, pos, opts...)
	}
}

// CheckURI reports whether uri is of a form Open accepts, without opening
// anything (a directory is not looked at): a nil error means Open gets past
// the URI. Errors match ErrBadURI.
func CheckURI(uri string) error {
	switch {
	case uri == "":
		return fmt.Errorf("%w: empty URI; supported: %s", ErrBadURI, SupportedURIs)
	case uri == "-" || hasScheme(uri, "stdin"):
		if uri != "-" && trimScheme(uri, "stdin") != "" {
			return fmt.Errorf("%w: %q: stdin takes no path or parameters (use \"-\" or \"stdin://\")", ErrBadURI, uri)
		}
	case hasScheme(uri, "gen"):
		rest := trimScheme(uri, "gen")
		if rest != "" && rest[0] != '?' {
			return fmt.Errorf("%w: %q: the generator takes only a query: gen://?count=N[&seed=S&size=B&keys=K&start=RFC3339&step=DURATION]", ErrBadURI, uri)
		}
		_, err := ParseGenQuery(strings.TrimPrefix(rest, "?"))
		return err
	case hasScheme(uri, "file"):
		if trimScheme(uri, "file") == "" {
			return fmt.Errorf("%w: %q: no directory; use file:///abs/dir or file://rel/dir", ErrBadURI, uri)
		}
	case strings.Contains(uri, "://"):
		scheme, _, _ := strings.Cut(uri, "://")
		return fmt.Errorf("%w: %q: unsupported scheme %q; supported: %s", ErrBadURI, uri, scheme, SupportedURIs)
	}
	return nil
}

// LocalPath returns the path that Open reads for uri when uri names the
// directory source ("file://DIR", "file:DIR" or a plain path); ok is false
// for every other source (stdin, the generator, other schemes) and for a
// URI Open refuses.
func LocalPath(uri string) (path string, ok bool) {
	switch {
	case uri == "" || uri == "-" || hasScheme(uri, "stdin") || hasScheme(uri, "gen"):
		return "", false
	case hasScheme(uri, "file"):
		dir := trimScheme(uri, "file")
		return dir, dir != ""
	case strings.Contains(uri, "://"):
		return "", false
	}
	return uri, true
}

// hasScheme reports whether uri starts with "scheme:" (case-insensitive).
func hasScheme(uri, scheme string) bool {
	return len(uri) > len(scheme) && uri[len(scheme)] == ':' && strings.EqualFold(uri[:len(scheme)], scheme)
}

// trimScheme removes "scheme://" or "scheme:" from uri.
func trimScheme(uri, scheme string) string {
	rest := uri[len(scheme)+1:]
	return strings.TrimPrefix(rest, "//")
}
