package main

import (
	"errors"
	"flag"
	"slices"
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
	list    bool // a comma-separated list of the words
}

// enumVar defines a flag that takes one of allowed (the default, value,
// may also be "": the flag not given).
func enumVar(fs *flag.FlagSet, p *string, name, value, usage string, allowed ...string) {
	*p = value
	fs.Var(&enumValue{p: p, allowed: allowed, emptyOK: value == ""}, name, usage)
}

// enumListVar defines a flag that takes a comma-separated list of words of
// allowed (default: none).
func enumListVar(fs *flag.FlagSet, p *string, name, usage string, allowed ...string) {
	*p = ""
	fs.Var(&enumValue{p: p, allowed: allowed, emptyOK: true, list: true}, name, usage)
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
	words := []string{s}
	if e.list {
		words = strings.Split(s, ",")
	}
	for i, w := range words {
		j := slices.IndexFunc(e.allowed, func(a string) bool { return strings.EqualFold(strings.TrimSpace(w), a) })
		if j < 0 {
			return errors.New("want " + e.allowedText())
		}
		words[i] = e.allowed[j]
	}
	*e.p = strings.Join(words, ",")
	return nil
}

// Get implements flag.Getter.
func (e *enumValue) Get() any { return e.String() }

// allowedText lists the words: "a, b or c", or for a list "one or more of
// a, b and c, separated by commas".
func (e *enumValue) allowedText() string {
	if e.list {
		return "one or more of " + strings.Join(e.allowed[:len(e.allowed)-1], ", ") + " and " + e.allowed[len(e.allowed)-1] + ", separated by commas"
	}
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
