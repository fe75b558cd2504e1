package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// mysqlPasswordEnv is the environment variable that holds the password of
// a mysql:// sink whose DSN has none (run and xa): a password on the
// command line is visible to every user of the machine.
const mysqlPasswordEnv = "FILESINK_MYSQL_PASSWORD"

// mysqlPassword fills in the password of a DSN that has none from
// mysqlPasswordEnv.
func mysqlPassword(mc *mysql.Config) {
	if mc.Passwd == "" {
		mc.Passwd = os.Getenv(mysqlPasswordEnv)
	}
}

// hasPassword reports whether uri carries a password: a mysql:// DSN's, or
// the user info of another URI (kafka://, http(s)://).
func hasPassword(uri string) bool {
	if dsn, ok := strings.CutPrefix(uri, mysqlScheme); ok {
		mc, err := mysql.ParseDSN(dsn)
		return err == nil && mc.Passwd != ""
	}
	return redactURI(uri) != uri
}

// warnPasswords prints one line, never the password, for each flag of
// cmd given on the command line (cmdline) whose value (values: flag name
// -> value) carries a password, saying where to put it instead.
func warnPasswords(w io.Writer, cmd string, cmdline map[string]bool, values map[string]string) {
	for _, name := range []string{"source", "sink", "schema-registry"} {
		v, ok := values[name]
		if !ok || !cmdline[name] || !hasPassword(v) {
			continue
		}
		instead := "the whole --" + name + " in " + envName(name) + " or a --config file"
		switch {
		case isMySQL(v) && cmd != "run":
			instead = mysqlPasswordEnv + ", with a DSN without one"
		case isMySQL(v):
			instead = mysqlPasswordEnv + " (with a DSN without one), or " + instead
		case isKafka(v):
			instead = "a file named by sasl_password_file=FILE, or " + instead
		}
		fmt.Fprintf(w, "filesink: warning: %s: --%s has a password on the command line, where other users can see it (ps) and shell history keeps it; give it in %s\n",
			cmd, name, instead)
	}
}
