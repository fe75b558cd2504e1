// Package mariadbtest gives tests of the MySQL XA sink a MariaDB server:
// the machine's own server, or a private mariadbd that a test may kill -9
// and restart.
//
// # The shared server
//
// Shared connects to the server the project's machines run on
// 127.0.0.1:3306 (user root, empty password, database test); the
// environment variable FILESINK_MARIADB_DSN (a go-sql-driver DSN) points it
// elsewhere. When the server cannot be reached the test is skipped with a
// loud reason when run by hand, and fails when CI=true: a green CI must mean
// the MariaDB tests ran. Every test gets its own database (NewDatabase),
// dropped when the test ends, so parallel tests never share a table.
//
// # Private servers
//
// Start runs a private mariadbd (Debian's 10.11 on the project's machines,
// found on PATH or in /usr/sbin) on a free port with a fresh data directory
// made by mariadb-install-db in a temporary directory, and stops it when the
// test ends. Kill9 kills it with SIGKILL (a crash; prepared XA branches
// survive it in the redo log) and Restart starts it again on the same data
// directory and port. Servers die with the test binary (Linux parent-death
// signal). Never kill the shared server.
//
// # Faults
//
// Open returns a DB whose connections go through a dialer that remembers
// every connection: Crash closes them all at once, as the death of the
// process holding them would (the server rolls back active XA branches and
// detaches prepared ones), and CutReply makes the server execute the next
// statement containing a given text and then cuts the connection before
// its reply reaches the driver (the "commit reply lost" case).
package mariadbtest
