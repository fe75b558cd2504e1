package kafka

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/filesink/filesink/source"
)

// URIForm is the syntax ParseURI accepts, for help texts.
const URIForm = `kafka://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/TOPIC[,TOPIC...]` +
	`[?partitions=0,1&start=earliest|latest|RFC3339|UNIXMILLIS&bounded=true&group=G` +
	`&client_id=ID&connect_timeout=10s&fetch_max_bytes=N` +
	`&tls=true&tls_ca=FILE&tls_cert=FILE&tls_key=FILE&tls_server_name=NAME&tls_insecure=true` +
	`&sasl=plain|scram-sha-256|scram-sha-512&sasl_user=U&sasl_password_file=FILE]`

// uriParams are the known query parameters.
var uriParams = []string{
	"partitions", "start", "bounded", "group", "client_id", "connect_timeout", "fetch_max_bytes",
	"tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "tls_insecure",
	"sasl", "sasl_user", "sasl_password_file",
}

// ParseURI parses a kafka:// URI (see URIForm) into a Config:
//
//	kafka://HOST:PORT[,HOST:PORT]/TOPIC[,TOPIC2][?partitions=0,1&start=...&bounded=true&group=G]
//
// Parameters: partitions (comma-separated, default all), start (earliest,
// latest, an RFC 3339 time or Unix milliseconds; default earliest), bounded
// (true/false), group (for CommitToGroup), client_id, connect_timeout (a Go
// duration), fetch_max_bytes; tls=true or any tls_* parameter enables TLS
// (tls_ca, tls_cert, tls_key: PEM files; tls_server_name; tls_insecure=true
// skips verification); sasl (plain, scram-sha-256, scram-sha-512) with the
// user and password from the URI's user info (percent-encoded) or from
// sasl_user and sasl_password_file (a file holding the password; a trailing
// newline is removed). Unknown or repeated parameters are errors.
//
// Errors match source.ErrBadURI and show the URI with any password
// replaced by "REDACTED". A password in the URI is visible in process
// listings; prefer sasl_password_file, or set Config.SASL.Password.
func ParseURI(uri string) (Config, error) {
	var c Config
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s (want %s)", source.ErrBadURI, strconv.Quote(RedactURI(uri)), fmt.Sprintf(format, args...), "kafka://HOST:PORT[,HOST:PORT]/TOPIC[,TOPIC][?partitions=...&start=...&bounded=true]")
	}
	rest, ok := cutScheme(uri)
	if !ok {
		return c, bad("not a kafka:// URI")
	}
	rest, query, _ := strings.Cut(rest, "?")
	if i := strings.IndexByte(rest, '#'); i >= 0 || strings.Contains(query, "#") {
		return c, bad("fragments (#) are not allowed")
	}
	authority, path, ok := strings.Cut(rest, "/")
	if !ok || strings.Trim(path, "/") == "" {
		return c, bad("no topic")
	}
	if strings.Contains(strings.Trim(path, "/"), "/") {
		return c, bad("one path segment of comma-separated topics, got %q", path)
	}
	var user, pass string
	var userSet, passSet bool
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		info := authority[:at]
		authority = authority[at+1:]
		u, p, hasPass := strings.Cut(info, ":")
		var err error
		if user, err = url.PathUnescape(u); err != nil || user == "" {
			return c, bad("bad user in user info")
		}
		userSet = true
		if hasPass {
			if pass, err = url.PathUnescape(p); err != nil {
				return c, bad("bad percent-encoding in the password")
			}
			passSet = true
		}
	}
	if authority == "" {
		return c, bad("no brokers")
	}
	var errs []error
	for _, b := range strings.Split(authority, ",") {
		host, port, err := splitHostPort(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %q: %v", b, err))
			continue
		}
		c.Brokers = append(c.Brokers, host+":"+port)
	}
	for _, t := range strings.Split(strings.Trim(path, "/"), ",") {
		if !topicRE.MatchString(t) {
			errs = append(errs, fmt.Errorf("topic %q: not a valid Kafka topic name", t))
			continue
		}
		c.Topics = append(c.Topics, t)
	}

	q, err := url.ParseQuery(query)
	if err != nil {
		return c, bad("query: %v", err)
	}
	for k, v := range q {
		if !slices.Contains(uriParams, k) {
			errs = append(errs, fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(uriParams, ", ")))
		} else if len(v) > 1 {
			errs = append(errs, fmt.Errorf("parameter %q given %d times", k, len(v)))
		}
	}
	get := func(k string) (string, bool) {
		if v, ok := q[k]; ok && len(v) > 0 {
			return v[0], true
		}
		return "", false
	}
	getBool := func(k string) bool {
		v, ok := get(k)
		if !ok {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want true or false", k, v))
		}
		return b
	}
	if v, ok := get("partitions"); ok {
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("partitions %q: want comma-separated integers >= 0", v))
				break
			}
			c.Partitions = append(c.Partitions, int32(n))
		}
	}
	if v, ok := get("start"); ok {
		if _, err := parseStart(v); err != nil {
			errs = append(errs, err)
		}
		c.Start = v
	}
	c.Bounded = getBool("bounded")
	c.Group, _ = get("group")
	c.ClientID, _ = get("client_id")
	if v, ok := get("connect_timeout"); ok {
		if c.ConnectTimeout, err = time.ParseDuration(v); err != nil || c.ConnectTimeout <= 0 {
			errs = append(errs, fmt.Errorf("connect_timeout %q: want a positive Go duration such as 10s", v))
		}
	}
	if v, ok := get("fetch_max_bytes"); ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("fetch_max_bytes %q: want an integer >= 1", v))
		}
		c.FetchMaxBytes = int32(n)
	}
	tlsOn := getBool("tls")
	var t TLSConfig
	t.CAFile, _ = get("tls_ca")
	t.CertFile, _ = get("tls_cert")
	t.KeyFile, _ = get("tls_key")
	t.ServerName, _ = get("tls_server_name")
	t.InsecureSkipVerify = getBool("tls_insecure")
	if _, ok := get("tls"); ok && !tlsOn {
		if t != (TLSConfig{}) {
			errs = append(errs, errors.New("tls=false contradicts the tls_* parameters"))
		}
	} else if tlsOn || t != (TLSConfig{}) {
		c.TLS = &t
	}
	mech, hasMech := get("sasl")
	if u, ok := get("sasl_user"); ok {
		if userSet {
			errs = append(errs, errors.New("user given both in the user info and in sasl_user"))
		}
		user, userSet = u, true
	}
	if f, ok := get("sasl_password_file"); ok {
		if passSet {
			errs = append(errs, errors.New("password given both in the user info and in sasl_password_file"))
		}
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("sasl_password_file: %v", err)) // names the file, not its content
		}
		pass, passSet = strings.TrimRight(string(b), "\r\n"), true
	}
	switch {
	case hasMech:
		if !userSet {
			errs = append(errs, fmt.Errorf("sasl=%s needs a user (kafka://USER:PASSWORD@HOST... or sasl_user)", mech))
		}
		c.SASL = &SASLConfig{Mechanism: strings.ToUpper(mech), User: user, Password: Secret(pass)}
	case userSet || passSet:
		errs = append(errs, errors.New("credentials given without sasl=plain|scram-sha-256|scram-sha-512"))
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return c, bad("%v", errors.Join(errs...))
	}
	if _, err := c.validate(); err != nil {
		return c, bad("%v", err)
	}
	return c, nil
}

// cutScheme removes "kafka://" (case-insensitive).
func cutScheme(uri string) (string, bool) {
	const scheme = "kafka://"
	if len(uri) < len(scheme) || !strings.EqualFold(uri[:len(scheme)], scheme) {
		return "", false
	}
	return uri[len(scheme):], true
}

// splitHostPort checks "host:port" (IPv6 hosts in brackets).
func splitHostPort(b string) (string, string, error) {
	i := strings.LastIndexByte(b, ':')
	if i <= 0 {
		return "", "", errors.New("want host:port")
	}
	host, port := b[:i], b[i+1:]
	if strings.HasPrefix(host, "[") != strings.HasSuffix(host, "]") || (!strings.HasPrefix(host, "[") && strings.Contains(host, ":")) {
		return "", "", errors.New("want host:port (IPv6 addresses in brackets)")
	}
	if strings.ContainsAny(host, " /?#@%") {
		return "", "", errors.New("bad host")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("port %q: want 1..65535", port)
	}
	return host, port, nil
}

// RedactURI returns uri with the password of its user info, if any,
// replaced by "REDACTED", for logs and errors. It errs on the side of
// hiding: it hides everything from the first ':' after "://" (or from the
// start, for text without "://") to the last '@', so that a password with
// an unencoded '/', '?' or '@' is hidden too.
func RedactURI(uri string) string {
	head, rest, ok := strings.Cut(uri, "://")
	if ok {
		head += "://"
	} else {
		head, rest = "", uri
	}
	at := strings.LastIndexByte(rest, '@')
	colon := strings.IndexByte(rest, ':')
	if at < 0 || colon < 0 || colon > at {
		return uri
	}
	return head + rest[:colon] + ":REDACTED" + rest[at:]
}
