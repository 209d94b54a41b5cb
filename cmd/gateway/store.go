package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/switchboard-gw/switchboard"
	"github.com/switchboard-gw/switchboard/cluster"
	"github.com/switchboard-gw/switchboard/config"
	"github.com/switchboard-gw/switchboard/health"
	"github.com/switchboard-gw/switchboard/metrics"
	"github.com/switchboard-gw/switchboard/semantic"
	"github.com/switchboard-gw/switchboard/sessions"
	"github.com/switchboard-gw/switchboard/storage"
	"github.com/switchboard-gw/switchboard/storage/postgres"
	"github.com/switchboard-gw/switchboard/tools"
)

// gatewayStore is what the gateway needs of its database, the SQLite file
// (storage) or PostgreSQL (storage/postgres).
type gatewayStore interface {
	sessions.Store
	semantic.Store
	tools.Memories
	Footprint(ctx context.Context) (switchboard.Footprint, error)
	Close() error
}

// database is the store storage.dsn names and, on PostgreSQL, the
// replica's share of the cluster (nil on SQLite: one gateway runs every
// conversation).
type database struct {
	store   gatewayStore
	pg      *postgres.DB
	cluster *cluster.Cluster
	replica string
}

// openDatabase opens the store storage.dsn names. On PostgreSQL its
// cluster reports to mets and to parts (health.go: watchedCluster).
func openDatabase(ctx context.Context, cfg config.Config, log *slog.Logger, mets *metrics.Metrics, parts *health.Registry) (database, error) {
	if !config.IsPostgres(cfg.Storage.DSN) {
		db, err := storage.Open(ctx, cfg.Storage.DSN, storage.WithLogger(log))
		if err != nil {
			return database{}, err
		}
		return database{store: db}, nil
	}
	id := replicaID(cfg)
	log = log.With("replica", id)
	pg, err := postgres.Open(ctx, cfg.Storage.DSN, postgres.WithReplica(id), postgres.WithLogger(log))
	if err != nil {
		return database{}, fmt.Errorf("storage.dsn: %w (gateway doctor checks the database)", err)
	}
	log.Info("storage: PostgreSQL, as one of the gateway's replicas", "lease", time.Duration(cfg.Storage.Lease))
	c := watchedCluster(cluster.Config{Store: pg, Lease: time.Duration(cfg.Storage.Lease), Logger: log}, pg, mets, parts)
	return database{store: pg, pg: pg, cluster: c, replica: id}, nil
}

// replicaID is storage.replica, or the host's name with a random suffix,
// new at each start: a replica restarted is a new one to the others.
func replicaID(cfg config.Config) string {
	if cfg.Storage.Replica != "" {
		return cfg.Storage.Replica
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gateway"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// sessionsCluster is the database's cluster as the sessions take it: nil
// (not a nil *cluster.Cluster) on SQLite.
func (d database) sessionsCluster() sessions.Cluster {
	if d.cluster == nil {
		return nil
	}
	return d.cluster
}
