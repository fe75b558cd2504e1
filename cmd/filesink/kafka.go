package main

import (
	"net/url"
	"strings"

	"github.com/filesink/filesink/source/kafka"
)

func isKafka(uri string) bool { return strings.HasPrefix(strings.ToLower(uri), "kafka://") }

// kafkaConfig parses a kafka:// --source URI and merges the --bounded and
// --start flags into it (set tells which flags were given). A flag that
// contradicts the URI's own parameter is an error; errors never show a
// password.
func kafkaConfig(uri string, set map[string]bool, bounded bool, start string) (kafka.Config, error) {
	q := uriQuery(uri)
	var add []string
	if set["start"] {
		if v, ok := q["start"]; ok && len(v) > 0 && !strings.EqualFold(v[0], start) {
			return kafka.Config{}, usageError("run: --start %q contradicts start=%s in --source %s", start, v[0], kafka.RedactURI(uri))
		}
		if _, ok := q["start"]; !ok {
			add = append(add, "start="+url.QueryEscape(start))
		}
	}
	if set["bounded"] {
		if v, ok := q["bounded"]; ok && len(v) > 0 && !strings.EqualFold(v[0], boolString(bounded)) {
			return kafka.Config{}, usageError("run: --bounded=%v contradicts bounded=%s in --source %s", bounded, v[0], kafka.RedactURI(uri))
		}
		if _, ok := q["bounded"]; !ok {
			add = append(add, "bounded="+boolString(bounded))
		}
	}
	full := uri
	if len(add) > 0 {
		sep := "?"
		switch {
		case strings.HasSuffix(uri, "?"):
			sep = ""
		case q != nil:
			sep = "&"
		}
		full += sep + strings.Join(add, "&")
	}
	cfg, err := kafka.ParseURI(full)
	if err != nil {
		return kafka.Config{}, usageError("run: --source: %v", err)
	}
	return cfg, nil
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// uriQuery returns the query parameters of a kafka:// URI (nil if it has no
// query). The query starts at the first '?' after the user info, whose
// password may hold an unencoded '?'.
func uriQuery(uri string) url.Values {
	rest := uri[strings.Index(uri, "://")+3:]
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	_, query, ok := strings.Cut(rest, "?")
	if !ok {
		return nil
	}
	q, err := url.ParseQuery(query)
	if err != nil || q == nil {
		return url.Values{} // ParseURI reports the error
	}
	return q
}
