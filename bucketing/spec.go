package bucketing

import (
	"strconv"
	"strings"
	"time"
)

// SpecForms lists the spec strings that Parse accepts.
const SpecForms = "none, datetime, datetime:LAYOUT, eventtime:FIELD, eventtime:FIELD:LAYOUT, field:NAME, hive:NAME[,NAME...]"

// Parse builds an Assigner from a command-line spec; loc is the time zone of
// the date-time assigners (nil means UTC). The forms are:
//
//	none                      BasePath()
//	datetime                  DateTime(DefaultLayout, loc)
//	datetime:LAYOUT           DateTime(LAYOUT, loc)
//	eventtime:FIELD           EventTime(FIELD, DefaultLayout, loc)
//	eventtime:FIELD:LAYOUT    EventTime(FIELD, LAYOUT, loc)
//	field:NAME                Field(NAME)
//	hive:NAME[,NAME...]       Hive(NAME, ...)
//
// The kind before the first ':' is case-insensitive; spaces around the names
// of hive are ignored. For eventtime the spec
// is split on its first two colons only, so a layout may contain ':'
// ("eventtime:ts:2006-01-02T15:04"). Layouts are Go time layouts and may
// contain '/' to make nested directories.
//
// Parse checks the whole configuration at once: any error matches
// ErrInvalidSpec, quotes the spec and, for an unknown kind, lists the valid
// forms. A nil error guarantees that the Assigner is well configured: its
// Bucket can fail only because of the record (source.ErrBadRecord) or, for
// datetime, a time whose formatted path is invalid (ErrInvalidBucket).
func Parse(spec string, loc *time.Location) (Assigner, error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	var a validator
	switch strings.ToLower(kind) {
	case "none":
		if hasArg {
			return nil, badSpec(spec, "none takes no argument")
		}
		return BasePath(), nil
	case "datetime":
		if hasArg && arg == "" {
			return nil, badSpec(spec, "empty layout (write \"datetime\" for the default layout)")
		}
		a = DateTime(arg, loc).(validator)
	case "eventtime":
		field, layout, hasLayout := strings.Cut(arg, ":")
		if field == "" {
			return nil, badSpec(spec, "missing FIELD (eventtime:FIELD or eventtime:FIELD:LAYOUT)")
		}
		if hasLayout && layout == "" {
			return nil, badSpec(spec, "empty layout (write \"eventtime:FIELD\" for the default layout)")
		}
		a = EventTime(field, layout, loc).(validator)
	case "field":
		if arg == "" {
			return nil, badSpec(spec, "missing NAME (field:NAME)")
		}
		a = Field(arg).(validator)
	case "hive":
		if arg == "" {
			return nil, badSpec(spec, "missing NAME (hive:NAME[,NAME...])")
		}
		names := strings.Split(arg, ",")
		for i, n := range names {
			names[i] = strings.TrimSpace(n)
		}
		a = Hive(names...).(validator)
	default:
		return nil, badSpec(spec, "unknown kind "+strconv.Quote(kind)+"; valid forms: "+SpecForms)
	}
	if err := a.validate(); err != nil {
		return nil, badSpec(spec, strings.TrimPrefix(err.Error(), ErrInvalidSpec.Error()+": "))
	}
	return a, nil
}

func badSpec(spec, msg string) error {
	return specError(strconv.Quote(spec) + ": " + msg)
}
