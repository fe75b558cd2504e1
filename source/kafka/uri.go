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
	`[?partitions=0,1&start=earliest|latest|RFC3339|UNIXMILLIS&bounded=true&monitor_group=G` +
	`&client_id=ID&connect_timeout=10s&fetch_max_bytes=N&fetch_max_partition_bytes=N` +
	`&tls=true&tls_ca=FILE&tls_cert=FILE&tls_key=FILE&tls_server_name=NAME&tls_insecure=true` +
	`&sasl=plain|scram-sha-256|scram-sha-512&sasl_user=U&sasl_password_file=FILE]`

// groupParameterMsg is why the URI parameter group= is refused: it was the
// name of monitor_group=, and a group that shares partitions is a flag.
const groupParameterMsg = "the URI parameter group= is now monitor_group= (offsets mirrored for lag dashboards); to share a topic's partitions among processes use --group NAME"

// uriParams are the known query parameters.
var uriParams = []string{
	"partitions", "start", "bounded", "monitor_group", "client_id", "connect_timeout", "fetch_max_bytes", "fetch_max_partition_bytes",
	"tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "tls_insecure",
	"sasl", "sasl_user", "sasl_password_file",
}

// ParseURI parses a kafka:// URI (see URIForm) into a Config:
//
//	kafka://HOST:PORT[,HOST:PORT]/TOPIC[,TOPIC2][?partitions=0,1&start=...&bounded=true&monitor_group=G]
//
// Parameters: partitions (comma-separated, default all), start (earliest,
// latest, an RFC 3339 time or Unix milliseconds; default earliest), bounded
// (true/false), monitor_group (Config.Group: the consumer group that
// CommitToGroup mirrors offsets to, for lag dashboards), client_id,
// connect_timeout (a Go duration), fetch_max_bytes,
// fetch_max_partition_bytes; tls=true or any tls_*
// parameter enables TLS (tls_ca, tls_cert, tls_key: PEM files;
// tls_server_name; tls_insecure=true skips verification); sasl (plain,
// scram-sha-256, scram-sha-512) with the user and password from the URI's
// user info (percent-encoded) or from sasl_user and sasl_password_file (a
// file holding the password; a trailing newline is removed). Unknown or
// repeated parameters are errors; so is group=, the former name of
// monitor_group=: its error says so and points to --group NAME.
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
	var p uriParser
	authority, msg := p.userInfo(authority)
	if msg != "" {
		return c, bad("%s", msg)
	}
	if authority == "" {
		return c, bad("no brokers")
	}
	p.addresses(&c, authority, path)
	var err error
	if p.q, err = url.ParseQuery(query); err != nil {
		return c, bad("query: %v", err)
	}
	if _, ok := p.q["group"]; ok {
		return c, fmt.Errorf("%w: %s: %s", source.ErrBadURI, strconv.Quote(RedactURI(uri)), groupParameterMsg)
	}
	p.checkParams()
	p.options(&c)
	p.tls(&c)
	p.sasl(&c)
	if len(p.errs) > 0 {
		slices.SortFunc(p.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return c, bad("%v", errors.Join(p.errs...))
	}
	if _, err := c.validate(); err != nil {
		return c, bad("%v", err)
	}
	return c, nil
}

// uriParser holds what ParseURI has read so far and every problem found,
// so that one error names them all.
type uriParser struct {
	q                url.Values
	errs             []error
	user, pass       string
	userSet, passSet bool
}

// userInfo takes USER[:PASSWORD]@ off authority; a non-empty message
// reports a malformed one.
func (p *uriParser) userInfo(authority string) (rest, msg string) {
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return authority, ""
	}
	u, pw, hasPass := strings.Cut(authority[:at], ":")
	var err error
	if p.user, err = url.PathUnescape(u); err != nil || p.user == "" {
		return "", "bad user in user info"
	}
	p.userSet = true
	if hasPass {
		if p.pass, err = url.PathUnescape(pw); err != nil {
			return "", "bad percent-encoding in the password"
		}
		p.passSet = true
	}
	return authority[at+1:], ""
}

// addresses reads the brokers and the topics.
func (p *uriParser) addresses(c *Config, authority, path string) {
	for _, b := range strings.Split(authority, ",") {
		host, port, err := splitHostPort(b)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("broker %q: %v", b, err))
			continue
		}
		c.Brokers = append(c.Brokers, host+":"+port)
	}
	for _, t := range strings.Split(strings.Trim(path, "/"), ",") {
		if !topicRE.MatchString(t) {
			p.errs = append(p.errs, fmt.Errorf("topic %q: not a valid Kafka topic name", t))
			continue
		}
		c.Topics = append(c.Topics, t)
	}
}

// checkParams reports unknown and repeated parameters.
func (p *uriParser) checkParams() {
	for k, v := range p.q {
		if !slices.Contains(uriParams, k) {
			p.errs = append(p.errs, fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(uriParams, ", ")))
		} else if len(v) > 1 {
			p.errs = append(p.errs, fmt.Errorf("parameter %q given %d times", k, len(v)))
		}
	}
}

func (p *uriParser) get(k string) (string, bool) {
	if v, ok := p.q[k]; ok && len(v) > 0 {
		return v[0], true
	}
	return "", false
}

func (p *uriParser) getBool(k string) bool {
	v, ok := p.get(k)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s %q: want true or false", k, v))
	}
	return b
}

// options reads the partitions, the start, bounded and the client's
// settings.
func (p *uriParser) options(c *Config) {
	if v, ok := p.get("partitions"); ok {
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || n < 0 {
				p.errs = append(p.errs, fmt.Errorf("partitions %q: want comma-separated integers >= 0", v))
				break
			}
			c.Partitions = append(c.Partitions, int32(n))
		}
	}
	if v, ok := p.get("start"); ok {
		if _, err := parseStart(v); err != nil {
			p.errs = append(p.errs, err)
		}
		c.Start = v
	}
	c.Bounded = p.getBool("bounded")
	c.Group, _ = p.get("monitor_group")
	c.ClientID, _ = p.get("client_id")
	if v, ok := p.get("connect_timeout"); ok {
		var err error
		if c.ConnectTimeout, err = time.ParseDuration(v); err != nil || c.ConnectTimeout <= 0 {
			p.errs = append(p.errs, fmt.Errorf("connect_timeout %q: want a positive Go duration such as 10s", v))
		}
	}
	if v, ok := p.get("fetch_max_bytes"); ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			p.errs = append(p.errs, fmt.Errorf("fetch_max_bytes %q: want an integer >= 1", v))
		}
		c.FetchMaxBytes = int32(n)
	}
	if v, ok := p.get("fetch_max_partition_bytes"); ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			p.errs = append(p.errs, fmt.Errorf("fetch_max_partition_bytes %q: want an integer >= 1", v))
		}
		c.FetchMaxPartitionBytes = int32(n)
	}
}

// tls reads tls and the tls_* parameters.
func (p *uriParser) tls(c *Config) {
	tlsOn := p.getBool("tls")
	var t TLSConfig
	t.CAFile, _ = p.get("tls_ca")
	t.CertFile, _ = p.get("tls_cert")
	t.KeyFile, _ = p.get("tls_key")
	t.ServerName, _ = p.get("tls_server_name")
	t.InsecureSkipVerify = p.getBool("tls_insecure")
	if _, ok := p.get("tls"); ok && !tlsOn {
		if t != (TLSConfig{}) {
			p.errs = append(p.errs, errors.New("tls=false contradicts the tls_* parameters"))
		}
	} else if tlsOn || t != (TLSConfig{}) {
		c.TLS = &t
	}
}

// sasl reads sasl, sasl_user and sasl_password_file, with the user info.
func (p *uriParser) sasl(c *Config) {
	mech, hasMech := p.get("sasl")
	if u, ok := p.get("sasl_user"); ok {
		if p.userSet {
			p.errs = append(p.errs, errors.New("user given both in the user info and in sasl_user"))
		}
		p.user, p.userSet = u, true
	}
	if f, ok := p.get("sasl_password_file"); ok {
		if p.passSet {
			p.errs = append(p.errs, errors.New("password given both in the user info and in sasl_password_file"))
		}
		b, err := os.ReadFile(f)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("sasl_password_file: %v", err)) // names the file, not its content
		}
		p.pass, p.passSet = strings.TrimRight(string(b), "\r\n"), true
	}
	switch {
	case hasMech:
		if !p.userSet {
			p.errs = append(p.errs, fmt.Errorf("sasl=%s needs a user (kafka://USER:PASSWORD@HOST... or sasl_user)", mech))
		}
		c.SASL = &SASLConfig{Mechanism: strings.ToUpper(mech), User: p.user, Password: Secret(p.pass)}
	case p.userSet || p.passSet:
		p.errs = append(p.errs, errors.New("credentials given without sasl=plain|scram-sha-256|scram-sha-512"))
	}
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
