package main

import (
	"errors"
	"flag"
	"strings"
)

// enumValue is a string flag that takes one of a list of words: any other
// value is refused when it is set (command line, environment or config
// file), before anything runs, with the list of the words it takes. A
// word is matched without regard to case and stored as the list spells it.
type enumValue struct {
	p       *string
	allowed []string
	emptyOK bool // the default is "": "" is taken too
}

// enumVar defines a flag that takes one of allowed (the default, value,
// may also be "": the flag not given).
func enumVar(fs *flag.FlagSet, p *string, name, value, usage string, allowed ...string) {
	*p = value
	fs.Var(&enumValue{p: p, allowed: allowed, emptyOK: value == ""}, name, usage)
}

func (e *enumValue) String() string {
	if e == nil || e.p == nil {
		return ""
	}
	return *e.p
}

func (e *enumValue) Set(s string) error {
	if s == "" && e.emptyOK {
		*e.p = ""
		return nil
	}
	for _, a := range e.allowed {
		if strings.EqualFold(s, a) {
			*e.p = a
			return nil
		}
	}
	return errors.New("want " + e.allowedText())
}

// Get implements flag.Getter.
func (e *enumValue) Get() any { return e.String() }

// allowedText lists the words: "a, b or c".
func (e *enumValue) allowedText() string {
	return orList(e.allowed)
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
