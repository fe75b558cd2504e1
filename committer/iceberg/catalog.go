package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite", pure Go

	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// warehouses

	"github.com/filesink/filesink/vfs"
)

// EmbeddedCatalogFile is the SQLite file of the embedded catalog, at the
// root of a local warehouse.
const EmbeddedCatalogFile = "catalog.db"

// metadataNameLen is the length of the name iceberg-go gives a metadata
// file under a table's location: "/metadata/", a 5-digit version, "-", a
// UUID, ".metadata.json".
const metadataNameLen = len("/metadata/00000-00000000-0000-0000-0000-000000000000.metadata.json")

// Catalog is an open Iceberg catalog: iceberg-go's, and what filesink
// knows of its limits. Safe for concurrent use; Close releases it.
type Catalog struct {
	catalog.Catalog
	// Kind is "sqlite" (the embedded catalog or an explicit SQLite file),
	// "mysql", "postgres" or "rest".
	Kind string
	// Desc names the catalog for messages, with no password, token or
	// client secret.
	Desc string
	db   *sql.DB
	// maxLocation is the longest metadata location the catalog's column
	// takes (0: no limit).
	maxLocation int
}

// OpenCatalog opens the catalog uri for tables in warehouse (a local
// directory, or s3://BUCKET/PREFIX), with props for its IO (the S3
// endpoint and credentials, for example). uri is one of:
//
//   - "": the embedded catalog, SQLite in warehouse/catalog.db, created
//     on first use; the warehouse must be local (SQLite on object
//     storage would not be safe);
//   - "sqlite:PATH": a SQLite file;
//   - "mysql://DSN": MySQL or MariaDB, DSN as go-sql-driver/mysql takes
//     it (user:password@tcp(host:port)/database);
//   - "postgres://..." or "postgresql://...": PostgreSQL (a libpq URL);
//   - "http://HOST:PORT/PATH" or "https://...": an Iceberg REST catalog
//     (iceberg-go's REST client), its base URL without the "/v1". The
//     warehouse goes to the server as the client's warehouse option, and
//     props to the client (the server's config may override them). Its
//     credentials, if any, are the URL's user info CLIENT_ID:SECRET or a
//     query parameter credential=CLIENT_ID:SECRET (OAuth2 client
//     credentials, exchanged at the server's token endpoint), or
//     token=TOKEN (a bearer token), values URL-encoded; no other query
//     parameter is taken.
//
// The SQL catalogs' tables are created if missing. A nil error means the
// catalog answered (a REST catalog: its config endpoint, with the
// credentials given). Errors and Desc never hold a password, token or
// client secret.
func OpenCatalog(ctx context.Context, uri, warehouse string, props iceberg.Properties) (*Catalog, error) {
	whURI, err := warehouseURI(warehouse)
	if err != nil {
		return nil, err
	}
	c := &Catalog{}
	var driver, dsn string
	var dialect sqlcat.SupportedDialect
	switch {
	case uri == "":
		if strings.Contains(whURI, "://") && !strings.HasPrefix(whURI, "file://") {
			return nil, fmt.Errorf("iceberg: warehouse %s: the embedded SQLite catalog needs a local warehouse; give a MySQL or PostgreSQL catalog", warehouse)
		}
		dir, err := localPath(whURI)
		if err != nil {
			return nil, err
		}
		if err := vfs.MkdirAllSync(vfs.OS{}, dir); err != nil {
			return nil, fmt.Errorf("iceberg: warehouse %s: %w", warehouse, err)
		}
		path := filepath.Join(dir, EmbeddedCatalogFile)
		c.Kind, c.Desc, driver, dialect = "sqlite", "the embedded catalog "+path, "sqlite", sqlcat.SQLite
		dsn = sqliteDSN(path)
	case strings.HasPrefix(uri, "sqlite:"):
		path := strings.TrimPrefix(uri, "sqlite:")
		c.Kind, c.Desc, driver, dialect = "sqlite", "SQLite catalog "+path, "sqlite", sqlcat.SQLite
		dsn = sqliteDSN(path)
	case strings.HasPrefix(uri, "mysql://"):
		dsn = strings.TrimPrefix(uri, "mysql://")
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("iceberg: catalog: not a MySQL DSN (user:password@tcp(host:port)/database): %v", err)
		}
		cfg.Passwd = ""
		c.Kind, c.Desc, driver, dialect = "mysql", "MySQL catalog "+cfg.FormatDSN(), "mysql", sqlcat.MySQL
	case strings.HasPrefix(uri, "postgres://"), strings.HasPrefix(uri, "postgresql://"):
		u, err := url.Parse(uri)
		if err != nil {
			return nil, errors.New("iceberg: catalog: not a PostgreSQL URL")
		}
		c.Kind, c.Desc, driver, dialect, dsn = "postgres", "PostgreSQL catalog "+u.Redacted(), "pgx", sqlcat.Postgres, uri
	case strings.HasPrefix(uri, "http://"), strings.HasPrefix(uri, "https://"):
		if err := c.openREST(ctx, uri, whURI, props); err != nil {
			return nil, err
		}
		return c, nil
	default:
		return nil, fmt.Errorf("iceberg: catalog %q: give mysql://DSN, postgres://URL, sqlite:PATH, http(s)://REST-URL, or none for the embedded catalog", redact(uri))
	}
	if err := c.open(ctx, driver, dsn, dialect, whURI, props); err != nil {
		return nil, err
	}
	return c, nil
}

// open connects to the database and opens iceberg-go's SQL catalog on it.
func (c *Catalog) open(ctx context.Context, driver, dsn string, dialect sqlcat.SupportedDialect, whURI string, props iceberg.Properties) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return fmt.Errorf("iceberg: %s: %w", c.Desc, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return fmt.Errorf("iceberg: %s unreachable: %w", c.Desc, err)
	}
	all := iceberg.Properties{"warehouse": whURI}
	for k, v := range props {
		all[k] = v
	}
	cat, err := sqlcat.NewCatalog("filesink", db, dialect, all)
	for try := 0; err != nil && try < 3 && ctx.Err() == nil; try++ {
		// NewCatalog creates the catalog's tables if missing: processes
		// starting together race on that (PostgreSQL fails the loser's
		// CREATE TABLE IF NOT EXISTS); the tables are there after it.
		cat, err = sqlcat.NewCatalog("filesink", db, dialect, all)
	}
	if err != nil {
		db.Close()
		return fmt.Errorf("iceberg: %s: %w", c.Desc, err)
	}
	c.Catalog, c.db = cat, db
	if c.maxLocation, err = c.locationLimit(ctx); err != nil {
		c.Close()
		return fmt.Errorf("iceberg: %s: %w", c.Desc, err)
	}
	return nil
}

// openREST opens iceberg-go's REST catalog at uri, which fetches the
// server's config. The credentials of uri go to the client's options
// only: neither Desc nor an error holds them.
func (c *Catalog) openREST(ctx context.Context, uri, whURI string, props iceberg.Properties) error {
	base, opts, err := restOptions(uri)
	if err != nil {
		return err
	}
	c.Kind, c.Desc = "rest", "REST catalog "+base
	opts = append(opts, rest.WithWarehouseLocation(whURI))
	if len(props) > 0 {
		opts = append(opts, rest.WithAdditionalProps(props))
	}
	cat, err := rest.NewCatalog(ctx, "filesink", base, opts...)
	if err != nil {
		return fmt.Errorf("iceberg: opening the %s: %w", c.Desc, oneLine{err})
	}
	c.Catalog = cat
	return nil
}

// restOptions splits a REST catalog URI into its base URL, with no user
// info, query or fragment, and the client options of its credentials.
// Its errors name no credential.
func restOptions(uri string) (string, []rest.Option, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", nil, errors.New("iceberg: catalog: not a REST catalog URL (http(s)://HOST:PORT/PATH)")
	}
	bare := *u
	bare.User, bare.RawQuery, bare.ForceQuery, bare.Fragment, bare.RawFragment = nil, "", false, "", ""
	base := bare.String()
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("iceberg: catalog %s: its query is not URL-encoded", base)
	}
	var opts []rest.Option
	if u.User != nil {
		cred := u.User.Username()
		if pw, ok := u.User.Password(); ok {
			cred += ":" + pw
		}
		opts = append(opts, rest.WithCredential(cred))
	}
	for k, vs := range query {
		switch {
		case len(vs) != 1 || vs[0] == "":
			return "", nil, fmt.Errorf("iceberg: catalog %s: query parameter %q needs one value", base, k)
		case k == "token":
			opts = append(opts, rest.WithOAuthToken(vs[0]))
		case k == "credential":
			opts = append(opts, rest.WithCredential(vs[0]))
		default:
			return "", nil, fmt.Errorf("iceberg: catalog %s: unknown query parameter %q; a REST catalog takes token= or credential=", base, k)
		}
	}
	if len(opts) > 1 {
		return "", nil, fmt.Errorf("iceberg: catalog %s: give one credential: user info, token= or credential=", base)
	}
	return base, opts, nil
}

// oneLine is an error with its line breaks made spaces (an OAuth2 error
// holds the token endpoint's reply on a line of its own).
type oneLine struct{ err error }

func (e oneLine) Error() string {
	return strings.Join(strings.FieldsFunc(e.err.Error(), func(r rune) bool { return r == '\n' || r == '\r' }), " ")
}

func (e oneLine) Unwrap() error { return e.err }

// locationLimit reads the length of the catalog's metadata_location
// column (0: none).
func (c *Catalog) locationLimit(ctx context.Context) (int, error) {
	q := ""
	switch c.Kind {
	case "mysql":
		q = "SELECT CHARACTER_MAXIMUM_LENGTH FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'iceberg_tables' AND COLUMN_NAME = 'metadata_location'"
	case "postgres":
		q = "SELECT character_maximum_length FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'iceberg_tables' AND column_name = 'metadata_location'"
	default:
		return 0, nil
	}
	var n sql.NullInt64
	if err := c.db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading the length of iceberg_tables.metadata_location: %w", err)
	}
	return int(n.Int64), nil
}

// CheckLocation refuses a table location whose metadata files' locations
// would not fit the catalog's metadata_location column (MySQL's is 255
// characters): the commit would fail at the catalog, after the metadata
// file was written. SQLite, PostgreSQL and REST catalogs get no limit
// (what a REST server stores the location in, filesink cannot know).
func (c *Catalog) CheckLocation(location string) error {
	if c.maxLocation > 0 && len(location)+metadataNameLen > c.maxLocation {
		return fmt.Errorf("iceberg: table location %s: its metadata locations (%d characters) do not fit the %d of the %s's metadata_location column; use a shorter warehouse path", location, len(location)+metadataNameLen, c.maxLocation, c.Desc)
	}
	return nil
}

// Close releases the catalog and its database connections.
func (c *Catalog) Close() error {
	var err error
	if cl, ok := c.Catalog.(catalog.Closer); ok {
		err = cl.Close()
	}
	if c.db != nil {
		err = errors.Join(err, c.db.Close())
	}
	return err
}

// warehouseURI returns warehouse as a location: s3://... as given, a local
// directory as an absolute file:// URI.
func warehouseURI(warehouse string) (string, error) {
	if warehouse == "" {
		return "", errors.New("iceberg: no warehouse: give a local directory or s3://BUCKET/PREFIX")
	}
	if strings.Contains(warehouse, "://") {
		if strings.HasPrefix(warehouse, "file://") || strings.HasPrefix(warehouse, "s3://") {
			return strings.TrimSuffix(warehouse, "/"), nil
		}
		return "", fmt.Errorf("iceberg: warehouse %s: give a local directory or s3://BUCKET/PREFIX", warehouse)
	}
	abs, err := filepath.Abs(warehouse)
	if err != nil {
		return "", fmt.Errorf("iceberg: warehouse %s: %w", warehouse, err)
	}
	return "file://" + filepath.ToSlash(abs), nil
}

// sqliteDSN is the modernc SQLite DSN of path: WAL with full syncs (a
// commit is durable when it returns) and a busy timeout for the
// processes of a group sharing the file.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
}

// redact drops the password of a URL-shaped catalog URI.
func redact(uri string) string {
	if u, err := url.Parse(uri); err == nil && u.User != nil {
		return u.Redacted()
	}
	return uri
}
