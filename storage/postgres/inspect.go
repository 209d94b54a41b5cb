package postgres

// A read-only look at a database, for gateway doctor: whether it can be
// reached (and when not, why and what would fix it), its schema version
// against this binary's, the replicas alive and the conversations each
// runs, the recall index, and what is left to embed. It changes nothing:
// every transaction of its connections is read only, no migration is
// applied, and it takes no part in the cluster (no replica row, no lease,
// no heartbeat), so it runs beside the replicas without disturbing them.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Problem says why a database cannot be used, for a person: what was
// found (Reason) and what would fix it (Fix, naming storage.dsn or the
// server's setting to change).
type Problem struct {
	Reason, Fix string
}

func (p *Problem) Error() string { return p.Reason }

// SchemaVersion is the last migration this binary has: a database whose
// schema_migrations ends below it is migrated by the next Open.
func SchemaVersion() int {
	files, _ := fs.ReadDir(migrationFiles, "migrations") // embedded: cannot fail
	last := 0
	for _, f := range files {
		var v int
		if _, err := fmt.Sscanf(f.Name(), "%04d_", &v); err == nil {
			last = max(last, v)
		}
	}
	return last
}

// Inspector reads a database without changing it. It is safe for
// concurrent use; Close it.
type Inspector struct {
	pool *pgxpool.Pool
	// Server is the server's version ("15.18"), ServerNum its number
	// (150018).
	Server    string
	ServerNum int
	// User and Database are who it connected as, and to what.
	User, Database string
}

// Inspect connects to dsn, at most two connections whose every
// transaction is read only, and asks the server its version, all within
// ctx (give it a deadline: a server behind a firewall that drops packets
// never answers). A database it cannot reach is a *Problem.
func Inspect(ctx context.Context, dsn string) (*Inspector, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, &Problem{Reason: "storage.dsn does not parse: " + err.Error(),
			Fix: "write it as postgres://user:password@host:5432/database?sslmode=require"}
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.ConnConfig.RuntimeParams["application_name"] = "switchboard doctor"
	if deadline, ok := ctx.Deadline(); ok && cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = max(time.Until(deadline), time.Millisecond)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, explainConnect(cfg.ConnConfig, err)
	}
	in := &Inspector{pool: pool, User: cfg.ConnConfig.User, Database: cfg.ConnConfig.Database}
	err = pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('server_version_num')::int`).
		Scan(&in.Server, &in.ServerNum)
	if err != nil {
		pool.Close()
		return nil, explainConnect(cfg.ConnConfig, err)
	}
	return in, nil
}

// Close closes the connections.
func (in *Inspector) Close() { in.pool.Close() }

// Schema is the database's schema as this binary sees it.
type Schema struct {
	// Applied is the last migration applied, 0 when none (no tables yet).
	Applied int
	// Known is the last this binary has (SchemaVersion).
	Known int
	// In is the schema the tables go to (current_schema(); "" when the
	// search_path names none that exists), and MayCreate whether the
	// user may create tables there, which a migration needs.
	In        string
	MayCreate bool
}

// Schema reads the schema version applied and whether the user may
// create tables.
func (in *Inspector) Schema(ctx context.Context) (Schema, error) {
	s := Schema{Known: SchemaVersion()}
	var migrated bool
	err := in.pool.QueryRow(ctx, `SELECT COALESCE(current_schema(), ''),
		COALESCE(has_schema_privilege(current_schema(), 'CREATE'), false),
		to_regclass('schema_migrations') IS NOT NULL`).Scan(&s.In, &s.MayCreate, &migrated)
	if err == nil && migrated {
		err = in.pool.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`).Scan(&s.Applied)
	}
	if err != nil {
		return Schema{}, fmt.Errorf("postgres: schema version: %w", err)
	}
	return s, nil
}

// has reports whether the table exists (in the search_path).
func (in *Inspector) has(ctx context.Context, table string) (bool, error) {
	var ok bool
	if err := in.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok); err != nil {
		return false, fmt.Errorf("postgres: table %s: %w", table, err)
	}
	return ok, nil
}

// Replicas lists the replicas whose last heartbeat is within the given
// time of the database's now, by id (none before any replica started).
func (in *Inspector) Replicas(ctx context.Context, within time.Duration) ([]Replica, error) {
	if ok, err := in.has(ctx, "replicas"); !ok || err != nil {
		return nil, err
	}
	return readReplicas(ctx, in.pool, within)
}

// Held counts the unexpired leases whose names start with prefix, by
// holder (SessionLease("") counts the conversations each replica runs).
func (in *Inspector) Held(ctx context.Context, prefix string) (map[string]int, error) {
	held := map[string]int{}
	if ok, err := in.has(ctx, "leases"); !ok || err != nil {
		return held, err
	}
	rows, err := in.pool.Query(ctx, `SELECT holder, count(*) FROM leases
		WHERE starts_with(name, $1) AND expires_at > `+nowMillis+` GROUP BY holder`, prefix)
	if err == nil {
		var (
			holder string
			n      int
		)
		_, err = pgx.ForEachRow(rows, []any{&holder, &n}, func() error {
			held[holder] = n
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: leases held: %w", err)
	}
	return held, nil
}

// RecallIndex is the recall index's state: the GIN index messages_recall
// over the column the database computes from each message as it is
// stored (so no message can be missing from it).
type RecallIndex struct {
	// Exists: the index is there; Valid: usable (a failed CREATE INDEX
	// CONCURRENTLY or REINDEX CONCURRENTLY leaves it invalid).
	Exists, Valid bool
	Bytes         int64
	// Messages is the planner's estimate of the messages stored, -1
	// before the table was first analysed.
	Messages int64
}

// RecallIndex reads the index's state from the catalog: nothing is
// scanned.
func (in *Inspector) RecallIndex(ctx context.Context) (RecallIndex, error) {
	r := RecallIndex{Messages: -1}
	err := in.pool.QueryRow(ctx, `SELECT x.indisvalid AND x.indisready, pg_relation_size(x.indexrelid)
		FROM pg_index x WHERE x.indexrelid = to_regclass('messages_recall')`).Scan(&r.Valid, &r.Bytes)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, nil
	case err != nil:
		return RecallIndex{}, fmt.Errorf("postgres: recall index: %w", err)
	}
	r.Exists = true
	var tuples float64
	err = in.pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = to_regclass('messages')`).Scan(&tuples)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return RecallIndex{}, fmt.Errorf("postgres: recall index: %w", err)
	}
	if tuples >= 0 && err == nil {
		r.Messages = int64(tuples)
	}
	return r, nil
}

// Unembedded is how many of the messages semantic recall indexes have no
// vector of space (pending), of how many (total). It reads every message.
func (in *Inspector) Unembedded(ctx context.Context, space string) (pending, total int64, err error) {
	if ok, err := in.has(ctx, "message_vectors"); !ok || err != nil {
		return 0, 0, err
	}
	err = in.pool.QueryRow(ctx, `SELECT count(*) FROM messages m WHERE m.role IN ('user', 'assistant')
		AND switchboard_content(m.data) IS NOT NULL`).Scan(&total)
	if err == nil {
		pending, err = countUnembedded(ctx, in.pool, space, 0)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: count unembedded messages: %w", err)
	}
	return pending, total, nil
}

// explainConnect turns a failed connection into a Problem: what failed,
// where, and the setting (storage.dsn's part, or the server's) to change.
func explainConnect(cfg *pgx.ConnConfig, err error) *Problem {
	where := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	if strings.HasPrefix(cfg.Host, "/") {
		where = fmt.Sprintf("the socket in %s (port %d)", cfg.Host, cfg.Port)
	}
	as := fmt.Sprintf("database %q as user %q at %s", cfg.Database, cfg.User, where)
	var (
		pe      *pgconn.PgError
		dnsErr  *net.DNSError
		unknown x509.UnknownAuthorityError
		badHost x509.HostnameError
		verify  *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &pe):
		return explainRefusal(cfg, as, pe)
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return &Problem{Reason: fmt.Sprintf("%s: the server does not offer TLS, and storage.dsn's sslmode requires it", where),
			Fix: "turn TLS on in the server (ssl = on in postgresql.conf, with a certificate), or, on a network you trust, set sslmode=disable in storage.dsn"}
	case errors.As(err, &unknown), errors.As(err, &badHost), errors.As(err, &verify):
		return &Problem{Reason: fmt.Sprintf("%s: the server's TLS certificate is not trusted: %v", where, cause(err)),
			Fix: "name the CA that signed it with sslrootcert=/path/to/ca.pem in storage.dsn and the host as its certificate names it; sslmode=require encrypts without checking the certificate"}
	case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded):
		return &Problem{Reason: fmt.Sprintf("no answer from %s in time", where),
			Fix: "check the host and port in storage.dsn, and that no firewall drops this machine's packets to it: a server that runs answers at once"}
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT):
		return &Problem{Reason: fmt.Sprintf("no server answers at %s (%v)", where, cause(err)),
			Fix: "start PostgreSQL, or correct the host and port in storage.dsn; a server on another machine must listen beyond loopback (listen_addresses in postgresql.conf)"}
	case errors.As(err, &dnsErr):
		return &Problem{Reason: fmt.Sprintf("the host %q is not known: %v", cfg.Host, dnsErr),
			Fix: "correct the host in storage.dsn"}
	}
	return &Problem{Reason: fmt.Sprintf("cannot reach %s: %v", as, err),
		Fix: "check storage.dsn, and that the server runs and accepts this user from this machine"}
}

// explainRefusal explains an error the server answered a connection with.
func explainRefusal(cfg *pgx.ConnConfig, as string, pe *pgconn.PgError) *Problem {
	said := fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, pe.Code)
	p := &Problem{Reason: fmt.Sprintf("the server refused %s: %s", as, said)}
	switch pe.Code {
	case "3D000": // invalid_catalog_name
		p.Reason = fmt.Sprintf("the database %q does not exist on the server (%s)", cfg.Database, said)
		p.Fix = fmt.Sprintf("create it, owned by the gateway's user: CREATE DATABASE %s OWNER %s; (or createdb -O %s %s), or correct the database in storage.dsn",
			ident(cfg.Database), ident(cfg.User), cfg.User, cfg.Database)
	case "28P01": // invalid_password
		p.Fix = "check the user and password in storage.dsn (with none there, PGPASSWORD and ~/.pgpass are read)"
	case "28000": // invalid_authorization_specification: pg_hba.conf, or no such role
		if strings.Contains(pe.Message, "pg_hba.conf") {
			p.Fix = "allow this machine in the server's pg_hba.conf (a host or hostssl line for the database, the user and this machine's address; then SELECT pg_reload_conf()); " +
				"if only hostssl lines match, storage.dsn needs sslmode=require"
		} else {
			p.Fix = fmt.Sprintf("create the role (CREATE ROLE %s LOGIN PASSWORD '…';), or correct the user in storage.dsn", ident(cfg.User))
		}
	case "42501": // insufficient_privilege: CONNECT revoked
		p.Fix = fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s;", ident(cfg.Database), ident(cfg.User))
	case "53300": // too_many_connections
		p.Fix = "raise max_connections on the server, or give each replica fewer connections (pool_max_conns=… in storage.dsn)"
	case "57P03": // cannot_connect_now: starting up, shutting down, in recovery
		p.Fix = "try again once the server has started; a standby in recovery takes no writes: point storage.dsn at the primary"
	default:
		p.Fix = "the server's log says more; check storage.dsn"
	}
	return p
}

// ident is name as SQL takes it: as it is when that is the name, quoted
// otherwise.
func ident(name string) string {
	if plainIdent.MatchString(name) && !reserved[name] {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

var (
	plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	// reserved are the keywords a role or database is likely named.
	reserved = map[string]bool{"user": true, "all": true, "default": true, "group": true, "order": true, "table": true, "public": true}
)

// cause is the innermost error of err's chain (its first branch), e.g.
// "connect: connection refused" without the layers pgconn adds.
func cause(err error) error {
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Err
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
