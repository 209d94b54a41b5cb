// Package pgtest runs a real PostgreSQL server for tests: initdb and
// pg_ctl into a temporary directory, listening on a Unix socket in it and
// on no TCP port, so that test runs on one machine never meet. Nothing is
// mocked and no container is needed; the distribution's packages
// (postgresql, version 15 or later) are enough.
//
// A package whose tests need it starts one server for the whole test
// binary in TestMain and gives each test a database of its own:
//
//	var pg *pgtest.Server
//
//	func TestMain(m *testing.M) { pgtest.Main(m, &pg) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pg.NewDatabase(t) // dropped when the test ends
//		...
//	}
//
// PostgreSQL refuses to run as root, so a test run as root (CI) runs the
// server as the user nobody.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a PostgreSQL server in a temporary directory.
type Server struct {
	dir  string // owns everything: data/, the socket, the log
	bin  string // where initdb, pg_ctl and postgres are
	cred *syscall.Credential
	dbs  atomic.Int64 // databases made, for unique names
}

// Main starts a server, stores it in *srv, runs the tests and stops it;
// it exits with the tests' status. A machine without PostgreSQL fails the
// run with what to install, rather than skipping tests silently.
func Main(m *testing.M, srv **Server) {
	s, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		os.Exit(1)
	}
	*srv = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Start initialises a database cluster in a new temporary directory and
// starts a server on it. Stop removes both. Settings ("name=value") are
// passed to the server after the tests' own, which they override: the
// benchmarks turn durability back on ("fsync=on", …).
func Start(settings ...string) (*Server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "switchboard-pg-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	s := &Server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("PostgreSQL will not run as root, and there is no user nobody to run it as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("temporary directory: %w", err)
		}
	}
	// --no-sync and fsync=off: the tests kill gateways, never the
	// server or the machine, so what the server has written is enough.
	if err := s.run("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := []string{
		"-k", dir, "-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300",
	}
	for _, kv := range settings {
		args = append(args, "-c", kv)
	}
	opts := strings.Join(args, " ")
	if err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, log)
	}
	return s, nil
}

// Stop stops the server at once (the tests are over: nothing is kept) and
// removes its directory.
func (s *Server) Stop() error {
	err := s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
	return errors.Join(err, os.RemoveAll(s.dir))
}

// DSN is the connection string of database db on the server.
func (s *Server) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + db}
	u.RawQuery = url.Values{"host": {s.dir}, "sslmode": {"disable"}}.Encode()
	return u.String()
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// NewDatabase creates an empty database for t and returns its DSN; it is
// dropped, with whatever still holds it open, when t ends.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	dsn, name, err := s.CreateDatabase(t.Name())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.admin(context.Background(), `DROP DATABASE `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return dsn
}

// CreateDatabase creates an empty database named after what (made unique)
// and returns its DSN and name; it stays until the server stops. Outside
// tests (the benchmarks) it is what NewDatabase is in them.
func (s *Server) CreateDatabase(what string) (dsn, name string, err error) {
	name = fmt.Sprintf("t%d_%s", s.dbs.Add(1), unsafeName.ReplaceAllString(strings.ToLower(what), "_"))
	if len(name) > 63 {
		name = name[:63] // PostgreSQL's limit on a name
	}
	if err := s.admin(context.Background(), `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("create database: %w", err)
	}
	return s.DSN(name), name, nil
}

// PID is the server's main process (postmaster): the connections' backend
// processes are its children.
func (s *Server) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("pgtest: postmaster.pid: %w", err)
	}
	return pid, nil
}

// admin runs one statement in the maintenance database.
func (s *Server) admin(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// run runs one of the server's programs as the server's user.
func (s *Server) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

// findBin finds the directory with initdb, pg_ctl and postgres: on PATH,
// or where Debian's packages put them (/usr/lib/postgresql/N/bin, the
// newest first).
func findBin() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL (15 or later) is not installed: initdb and pg_ctl were looked for on PATH and in /usr/lib/postgresql/*/bin; install it (Debian: apt-get install postgresql)")
}

// version is N of /usr/lib/postgresql/N/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}
