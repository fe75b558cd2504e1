package mysqlxa

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// kind is how a JSON value is converted for a column.
type kind int

const (
	kInt     kind = iota // signed integer types
	kUint                // unsigned integer types, BIT
	kFloat               // FLOAT, DOUBLE
	kDecimal             // DECIMAL: passed as the number's text
	kString              // character types, ENUM, SET, temporal types: JSON strings (objects, arrays as their text)
	kBytes               // binary types: JSON strings, as bytes
	kJSON                // MySQL JSON: any value, as its text
)

var kindNames = [...]string{"an integer", "an unsigned integer", "a number", "a decimal number", "a string", "a string", "a JSON value"}

type column struct {
	name     string
	kind     kind
	nullable bool
	key      bool
}

// table is the validated shape of the target table.
type table struct {
	schema, name string
	display      string // db.name, for messages
	quoted       string // `db`.`name`
	cols         []column
	index        map[string]int // field name -> index in cols
	keyCols      []int
	insertHead   string // INSERT INTO t (a,b) VALUES
	row          string // (?,?)
	tail         string // "" or " ON DUPLICATE KEY UPDATE ..."
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// splitName splits "db.name" (or "name", in defaultDB).
func splitName(s, defaultDB string) (db, name string) {
	if d, n, ok := strings.Cut(s, "."); ok {
		return d, n
	}
	return defaultDB, s
}

// loadTable reads the table's columns from information_schema and checks
// cfg against them.
func loadTable(ctx context.Context, db *sql.DB, cfg *config) (*table, error) {
	var current sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&current); err != nil {
		return nil, fmt.Errorf("mysqlxa: %w", err)
	}
	schema, name := splitName(cfg.table, current.String)
	if schema == "" {
		return nil, fmt.Errorf("mysqlxa: table %q has no database: name it db.table or connect with a default database", cfg.table)
	}
	t := &table{schema: schema, name: name, display: schema + "." + name,
		quoted: quoteIdent(schema) + "." + quoteIdent(name), index: map[string]int{}}
	if err := t.checkEngine(ctx, db); err != nil {
		return nil, err
	}
	all, err := t.readColumns(ctx, db)
	if err != nil {
		return nil, err
	}
	if err := t.chooseColumns(cfg, all); err != nil {
		return nil, err
	}
	if err := t.statements(cfg.mode); err != nil {
		return nil, err
	}
	return t, nil
}

// columnInfo is a column of the table as information_schema describes it.
type columnInfo struct {
	col                column
	pk, auto, gen, bad bool
	dataType           string
}

// checkEngine checks that the table exists and uses InnoDB.
func (t *table) checkEngine(ctx context.Context, db *sql.DB) error {
	var engine sql.NullString
	err := db.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", t.schema, t.name).Scan(&engine)
	if err == sql.ErrNoRows {
		return fmt.Errorf("mysqlxa: table %s does not exist", t.display)
	}
	if err != nil {
		return fmt.Errorf("mysqlxa: table %s: %w", t.display, err)
	}
	if !strings.EqualFold(engine.String, "InnoDB") {
		return fmt.Errorf("mysqlxa: table %s uses engine %q: XA needs a transactional engine with two-phase commit (InnoDB)", t.display, engine.String)
	}
	return nil
}

// readColumns reads every column of the table, in order.
func (t *table) readColumns(ctx context.Context, db *sql.DB) ([]columnInfo, error) {
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY, EXTRA
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, t.schema, t.name)
	if err != nil {
		return nil, fmt.Errorf("mysqlxa: table %s: %w", t.display, err)
	}
	defer rows.Close()
	var all []columnInfo
	for rows.Next() {
		var n, dt, ct, nullable, key, extra string
		if err := rows.Scan(&n, &dt, &ct, &nullable, &key, &extra); err != nil {
			return nil, fmt.Errorf("mysqlxa: table %s: %w", t.display, err)
		}
		k, ok := kindOf(strings.ToLower(dt), strings.ToLower(ct))
		extra = strings.ToUpper(extra)
		all = append(all, columnInfo{col: column{name: n, kind: k, nullable: nullable == "YES"}, pk: key == "PRI",
			auto: strings.Contains(extra, "AUTO_INCREMENT"), gen: strings.Contains(extra, "GENERATED") || strings.Contains(extra, "VIRTUAL") || strings.Contains(extra, "PERSISTENT") || strings.Contains(extra, "STORED"),
			bad: !ok, dataType: dt})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqlxa: table %s: %w", t.display, err)
	}
	return all, nil
}

// chooseColumns sets the columns written and the key columns from cfg (by
// default every non-generated column and the primary key).
func (t *table) chooseColumns(cfg *config, all []columnInfo) error {
	byName := map[string]int{}
	for i, c := range all {
		byName[c.col.name] = i
	}
	key := cfg.key
	if len(key) == 0 {
		for _, c := range all {
			if c.pk {
				key = append(key, c.col.name)
			}
		}
	}
	if len(key) == 0 && cfg.mode != Insert {
		return fmt.Errorf("mysqlxa: table %s has no primary key: mode %s needs WithKey", t.display, cfg.mode)
	}
	var want []string
	if len(cfg.columns) > 0 {
		want = append(want, cfg.columns...)
		for _, k := range key {
			if !slices.Contains(want, k) {
				want = append(want, k)
			}
		}
	} else {
		for _, c := range all {
			if !c.gen && (!c.auto || slices.Contains(key, c.col.name)) {
				want = append(want, c.col.name)
			}
		}
	}
	for _, n := range want {
		i, ok := byName[n]
		switch {
		case !ok:
			return fmt.Errorf("mysqlxa: table %s has no column %q", t.display, n)
		case all[i].gen:
			return fmt.Errorf("mysqlxa: column %s of table %s is generated and cannot be written", n, t.display)
		case all[i].bad:
			return fmt.Errorf("mysqlxa: column %s of table %s has type %s, which this sink cannot write (leave it out of WithColumns)", n, t.display, all[i].dataType)
		}
		if _, dup := t.index[n]; dup {
			return fmt.Errorf("mysqlxa: column %s listed twice for table %s", n, t.display)
		}
		c := all[i].col
		c.key = slices.Contains(key, n)
		t.index[n] = len(t.cols)
		t.cols = append(t.cols, c)
	}
	for _, k := range key {
		if _, ok := byName[k]; !ok {
			return fmt.Errorf("mysqlxa: key column %q is not a column of table %s", k, t.display)
		}
		t.keyCols = append(t.keyCols, t.index[k])
	}
	if len(t.cols) == 0 {
		return fmt.Errorf("mysqlxa: no column of table %s to write", t.display)
	}
	if len(t.cols) > maxPlaceholders {
		return fmt.Errorf("mysqlxa: table %s has too many columns", t.display)
	}
	return nil
}

// statements builds the INSERT statement's parts for mode.
func (t *table) statements(mode Mode) error {
	var names, updates []string
	for _, c := range t.cols {
		names = append(names, quoteIdent(c.name))
		if c.key {
			continue
		}
		q := quoteIdent(c.name)
		switch mode {
		case Upsert:
			updates = append(updates, q+" = VALUES("+q+")")
		case Increment:
			if c.kind != kInt && c.kind != kUint && c.kind != kFloat && c.kind != kDecimal {
				return fmt.Errorf("mysqlxa: mode increment adds to every non-key column, and column %s of table %s is not numeric (leave it out of WithColumns or make it a key)", c.name, t.display)
			}
			updates = append(updates, q+" = "+q+" + VALUES("+q+")")
		}
	}
	t.insertHead = "INSERT INTO " + t.quoted + " (" + strings.Join(names, ", ") + ") VALUES "
	t.row = "(" + strings.Repeat("?, ", len(t.cols)-1) + "?)"
	if mode != Insert {
		if len(updates) == 0 { // only key columns: a duplicate changes nothing
			q := quoteIdent(t.cols[t.keyCols[0]].name)
			updates = append(updates, q+" = "+q)
		}
		t.tail = " ON DUPLICATE KEY UPDATE " + strings.Join(updates, ", ")
	}
	return nil
}

// kindOf maps a column type; ok is false for types the sink cannot write
// (spatial types).
func kindOf(dataType, columnType string) (kind, bool) {
	unsigned := strings.Contains(columnType, "unsigned")
	switch dataType {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		if unsigned {
			return kUint, true
		}
		return kInt, true
	case "bit":
		return kUint, true
	case "float", "double", "real", "double precision":
		return kFloat, true
	case "decimal", "numeric", "dec", "fixed":
		return kDecimal, true
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set",
		"date", "datetime", "timestamp", "time", "year", "uuid", "inet4", "inet6":
		return kString, true
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return kBytes, true
	case "json":
		return kJSON, true
	}
	return 0, false
}

// statement returns the INSERT for n rows.
func (t *table) statement(n int) string {
	var b strings.Builder
	b.Grow(len(t.insertHead) + n*(len(t.row)+2) + len(t.tail))
	b.WriteString(t.insertHead)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.row)
	}
	b.WriteString(t.tail)
	return b.String()
}

// convert turns one JSON value into the argument for column c.
func convert(c *column, raw json.RawMessage) (any, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, "empty value"
	}
	if raw[0] == 'n' { // null
		if !c.nullable {
			return nil, "null for a NOT NULL column"
		}
		return nil, ""
	}
	wrong := func() (any, string) {
		return nil, fmt.Sprintf("want %s, got %s", kindNames[c.kind], abbreviate(raw))
	}
	isNum := raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'
	switch c.kind {
	case kInt, kUint:
		switch {
		case raw[0] == 't':
			return int64(1), ""
		case raw[0] == 'f':
			return int64(0), ""
		case !isNum:
			return wrong()
		}
		if c.kind == kInt {
			v, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				return nil, fmt.Sprintf("not an integer in range: %s", abbreviate(raw))
			}
			return v, ""
		}
		v, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			return nil, fmt.Sprintf("not an unsigned integer in range: %s", abbreviate(raw))
		}
		return v, ""
	case kFloat:
		if !isNum {
			return wrong()
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return nil, fmt.Sprintf("not a number in range: %s", abbreviate(raw))
		}
		return v, ""
	case kDecimal:
		if !isNum {
			return wrong()
		}
		return string(raw), ""
	case kString:
		switch raw[0] {
		case '"':
			s, ok := unquote(raw)
			if !ok {
				return nil, "invalid JSON string"
			}
			return s, ""
		case '{', '[':
			return string(raw), ""
		}
		return wrong()
	case kBytes:
		if raw[0] != '"' {
			return wrong()
		}
		s, ok := unquote(raw)
		if !ok {
			return nil, "invalid JSON string"
		}
		return []byte(s), ""
	case kJSON:
		return string(raw), ""
	}
	return wrong()
}

// unquote decodes a JSON string; the common case (no escapes) is a copy.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

func abbreviate(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}
