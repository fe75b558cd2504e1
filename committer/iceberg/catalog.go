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
	// "mysql" or "postgres".
	Kind string
	// Desc names the catalog for messages, with no credentials.
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
//   - "postgres://..." or "postgresql://...": PostgreSQL (a libpq URL).
//
// The catalog's tables are created if missing. A nil error means the
// catalog answered. Errors and Desc never hold a password.
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
	default:
		return nil, fmt.Errorf("iceberg: catalog %q: give mysql://DSN, postgres://URL, sqlite:PATH, or none for the embedded catalog", redact(uri))
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
// file was written.
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
