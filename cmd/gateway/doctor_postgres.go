package main

// gateway doctor on PostgreSQL (storage.dsn: postgres://…), in place of
// the SQLite file's rows: the database reached, its schema against this
// binary's, the replicas live and the conversations each runs, and the
// recall index; the embeddings row reads what is left to embed here too.
// Everything is read through a postgres.Inspector: every transaction read
// only, no migration applied, no replica of its own (no heartbeat, no
// lease), so it runs beside the replicas without disturbing them.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gw/switchboard/cluster"
	"github.com/switchboard-gw/switchboard/storage/postgres"
)

// pgConnectTimeout bounds reaching the database (--timeout, when shorter).
const pgConnectTimeout = 10 * time.Second

// inspector connects to the database once, for every row that reads it
// (the embeddings row runs beside the others); closeInspector closes it.
func (d *doctor) inspector(ctx context.Context) (*postgres.Inspector, error) {
	d.pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, min(d.timeout, pgConnectTimeout))
		defer cancel()
		d.pg, d.pgErr = postgres.Inspect(ctx, d.cfg.Storage.DSN)
	})
	return d.pg, d.pgErr
}

func (d *doctor) closeInspector() {
	if d.pg != nil {
		d.pg.Close()
	}
}

// checkPostgres is the database's rows on PostgreSQL: database, schema,
// replicas and recall index.
func (d *doctor) checkPostgres(ctx context.Context) []checkResult {
	db := checkResult{Name: "database"}
	where := redactDSN(d.cfg.Storage.DSN)
	start := time.Now()
	in, err := d.inspector(ctx)
	if err != nil {
		db.Sev, db.Detail = sevProblem, where+": "+err.Error()
		if p, ok := err.(*postgres.Problem); ok {
			db.Fix = p.Fix
		}
		db.Detail += "\nthe gateway does not start without it"
		notChecked := "not checked: the database is not reached (see the database row)"
		return []checkResult{db,
			{Name: "schema", Sev: sevInfo, Detail: notChecked},
			{Name: "replicas", Sev: sevInfo, Detail: notChecked},
			{Name: "recall index", Sev: sevInfo, Detail: notChecked}}
	}
	db.Sev = sevOK
	db.Detail = fmt.Sprintf("%s: PostgreSQL %s, reached in %s as %s (read only: the doctor writes nothing and is no replica)",
		where, in.Server, time.Since(start).Round(time.Millisecond), in.User)
	if in.ServerNum < 150000 {
		db.Sev = sevWarn
		db.Detail += "\nthe gateway is made and tested for PostgreSQL 15 and later"
		db.Fix = "upgrade the server to PostgreSQL 15 or later"
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	schema, schemaRow := d.checkSchema(ctx, in)
	return []checkResult{db, schemaRow, d.checkReplicas(ctx, in, schema), d.checkPostgresRecall(ctx, in, schema)}
}

// checkSchema compares the migrations applied with this binary's, and
// whether the user may apply the missing ones.
func (d *doctor) checkSchema(ctx context.Context, in *postgres.Inspector) (postgres.Schema, checkResult) {
	res := checkResult{Name: "schema"}
	s, err := in.Schema(ctx)
	if err != nil {
		res.Sev, res.Detail = sevWarn, "not read: "+err.Error()
		return s, res
	}
	grant := fmt.Sprintf("GRANT CREATE ON SCHEMA %s TO %s; (since PostgreSQL 15, only the database's owner may create tables in public by default), "+
		"or make the user the database's owner: ALTER DATABASE %s OWNER TO %s;", cmp.Or(s.In, "public"), in.User, in.Database, in.User)
	switch {
	case s.In == "":
		res.Sev = sevProblem
		res.Detail = fmt.Sprintf("the user %s's search_path names no schema that exists: the gateway has nowhere to create its tables", in.User)
		res.Fix = fmt.Sprintf("ALTER ROLE %s SET search_path = public;", in.User)
	case s.Applied < s.Known && !s.MayCreate:
		res.Sev = sevProblem
		res.Detail = fmt.Sprintf("schema version %d of this binary's %d, and the user %s may not create tables in schema %s: the gateway cannot migrate it, and does not start",
			s.Applied, s.Known, in.User, s.In)
		res.Fix = grant
	case s.Applied == 0:
		res.Sev = sevOK
		res.Detail = fmt.Sprintf("no tables yet: the first gateway to start creates them in schema %s (schema version %d)", s.In, s.Known)
	case s.Applied < s.Known:
		res.Sev = sevInfo
		res.Detail = fmt.Sprintf("schema version %d, older than this binary's %d: starts will migrate it (each migration once, whichever replica starts first)", s.Applied, s.Known)
	case s.Applied > s.Known:
		res.Sev = sevProblem
		res.Detail = fmt.Sprintf("schema version %d, newer than this binary's %d: a newer gateway has migrated the database", s.Applied, s.Known)
		res.Fix = "this binary is older than the database: upgrade it (to the version the other replicas run)"
	default:
		res.Sev = sevOK
		res.Detail = fmt.Sprintf("schema version %d, this binary's", s.Applied)
	}
	return s, res
}

// checkReplicas lists the replicas live (heard from within
// cluster.LiveWithin the lease) with the conversations each runs. A live
// replica on this machine is taken for the gateway running on this
// configuration, so its ports are in use by it (checkPort).
func (d *doctor) checkReplicas(ctx context.Context, in *postgres.Inspector, s postgres.Schema) checkResult {
	res := checkResult{Name: "replicas", Sev: sevInfo}
	lease := time.Duration(d.cfg.Storage.Lease)
	within := cluster.LiveWithin(lease)
	window := fmt.Sprintf("heard from within %s, 3× storage.lease", within)
	if s.Applied == 0 {
		res.Detail = "none yet: no gateway has started on this database"
		return res
	}
	live, err := in.Replicas(ctx, within)
	var held map[string]int
	if err == nil {
		held, err = in.Held(ctx, postgres.SessionLease(""))
	}
	if err != nil {
		res.Sev, res.Detail = sevWarn, "not read: "+err.Error()
		return res
	}
	if len(live) == 0 {
		res.Detail = fmt.Sprintf("no replica is live (none %s): no gateway runs on this database now", window)
	} else {
		host, _ := os.Hostname()
		each := make([]string, len(live))
		for i, r := range live {
			if i == 0 {
				each[i] = fmt.Sprintf("%s (%s)", r.ID, plural(held[r.ID], "conversation"))
			} else {
				each[i] = fmt.Sprintf("%s (%d)", r.ID, held[r.ID])
			}
			if r.Host != "" && r.Host == host {
				d.dbHeld = true
			}
			delete(held, r.ID)
		}
		res.Detail = fmt.Sprintf("%s live: %s\n(%s; one that stops cleanly leaves at once)", plural(len(live), "replica"), strings.Join(each, ", "), window)
	}
	orphaned := 0
	for _, n := range held {
		orphaned += n
	}
	if orphaned > 0 {
		are := fmt.Sprintf("%d conversations are", orphaned)
		if orphaned == 1 {
			are = "1 conversation is"
		}
		res.Detail += fmt.Sprintf("\n%s held by replicas not heard from: another takes each over once its lease runs out (within %s)",
			are, lease+lease/4)
	}
	return res
}

// checkPostgresRecall reads the recall index's state from the catalog.
// The words are a column the database computes from every message as it
// is stored, so no message can be missing from the index: what SQLite's
// FTS5 check compares has no counterpart here.
func (d *doctor) checkPostgresRecall(ctx context.Context, in *postgres.Inspector, s postgres.Schema) checkResult {
	res := checkResult{Name: "recall index"}
	if s.Applied == 0 {
		res.Sev, res.Detail = sevOK, "not created yet: the gateway creates it with the tables"
		return res
	}
	r, err := in.RecallIndex(ctx)
	switch {
	case err != nil:
		res.Sev, res.Detail = sevWarn, "not checked: "+err.Error()
	case !r.Exists:
		res.Sev = sevWarn
		res.Detail = "the GIN index messages_recall is missing: every search reads all the messages"
		res.Fix = "recreate it, with the gateways running: CREATE INDEX CONCURRENTLY messages_recall ON messages USING gin (recall);"
	case !r.Valid:
		res.Sev = sevWarn
		res.Detail = "the GIN index messages_recall is invalid (a CREATE INDEX or REINDEX CONCURRENTLY that did not finish): searches do not use it"
		res.Fix = "rebuild it, with the gateways running: REINDEX INDEX CONCURRENTLY messages_recall;"
	default:
		res.Sev = sevOK
		res.Detail = "the GIN index messages_recall is valid, " + byteSize(r.Bytes)
		if r.Messages >= 0 {
			res.Detail += fmt.Sprintf(", over about %d messages", r.Messages)
		}
		res.Detail += "\nits words are computed by the database from each message as it is stored, so none is missing"
	}
	return res
}

// postgresBacklog is embeddingBacklog on PostgreSQL: read while the
// replicas run, as one more reader.
func (d *doctor) postgresBacklog(ctx context.Context, space string) string {
	in, err := d.inspector(ctx)
	if err != nil {
		return "what is left to embed was not read: the database is not reached (see the database row)"
	}
	pending, total, err := in.Unembedded(ctx, space)
	switch {
	case err != nil:
		return fmt.Sprintf("what is left to embed could not be read: %v", err)
	case total == 0:
		return "no messages stored yet"
	case pending == 0:
		return fmt.Sprintf("all %d stored messages are embedded", total)
	}
	return fmt.Sprintf("%d of %d stored messages wait to be embedded: the replicas embed them in the background, 100 a call", pending, total)
}

// redactDSN is the DSN to show: without its user and password (the
// database row says who it connected as), its settings unescaped.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "storage.dsn"
	}
	u.User = nil
	q := u.Query()
	q.Del("password")
	var settings []string
	for _, k := range slices.Sorted(maps.Keys(q)) {
		for _, v := range q[k] {
			settings = append(settings, k+"="+v)
		}
	}
	u.RawQuery = ""
	shown := u.String()
	if len(settings) > 0 {
		shown += "?" + strings.Join(settings, "&")
	}
	return shown
}

// dsnPassword is the password in a PostgreSQL DSN, to scrub from every row.
func dsnPassword(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	if p, ok := u.User.Password(); ok {
		return p
	}
	return u.Query().Get("password")
}
