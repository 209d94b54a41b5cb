package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-gw/switchboard"
)

// CreateInvite stores an invitation (its code only as a hash).
func (db *DB) CreateInvite(ctx context.Context, inv switchboard.Invite) error {
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO invites (code_hash, session_id, role, uses_left, expires_at, created_by, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, inv.CodeHash, inv.SessionID, inv.Role, inv.UsesLeft,
			inv.ExpiresAt.UnixMilli(), inv.CreatedBy, inv.CreatedAt.UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("storage: create invite for %s: %w", inv.SessionID, err)
	}
	return nil
}

// Invite reads the invite with codeHash without spending it
// (switchboard.ErrNotFound when there is none).
func (db *DB) Invite(ctx context.Context, codeHash string) (switchboard.Invite, error) {
	var inv switchboard.Invite
	var expires, created int64
	var revoked int
	err := db.read.QueryRowContext(ctx, `SELECT code_hash, session_id, role, uses_left, expires_at, created_by, created_at, revoked
		FROM invites WHERE code_hash = ?`, codeHash).Scan(&inv.CodeHash, &inv.SessionID, &inv.Role, &inv.UsesLeft,
		&expires, &inv.CreatedBy, &created, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return inv, fmt.Errorf("storage: invite: %w", err)
	}
	inv.ExpiresAt, inv.CreatedAt, inv.Revoked = fromMillis(expires), fromMillis(created), revoked != 0
	return inv, nil
}

// RedeemInvite spends one use of the invite with codeHash, in one
// transaction: an unknown, expired, used-up or withdrawn code is refused
// (switchboard.ErrInvite…) and changes nothing.
func (db *DB) RedeemInvite(ctx context.Context, codeHash string, now time.Time) (switchboard.Invite, error) {
	var inv switchboard.Invite
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var expires, created int64
		var revoked int
		err := tx.QueryRowContext(ctx, `SELECT code_hash, session_id, role, uses_left, expires_at, created_by, created_at, revoked
			FROM invites WHERE code_hash = ?`, codeHash).Scan(&inv.CodeHash, &inv.SessionID, &inv.Role, &inv.UsesLeft,
			&expires, &inv.CreatedBy, &created, &revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return switchboard.ErrInviteUnknown
		}
		if err != nil {
			return err
		}
		inv.ExpiresAt, inv.CreatedAt, inv.Revoked = fromMillis(expires), fromMillis(created), revoked != 0
		if err := inv.Redeemable(now); err != nil {
			return err
		}
		inv.UsesLeft--
		_, err = tx.ExecContext(ctx, `UPDATE invites SET uses_left = uses_left - 1 WHERE code_hash = ?`, codeHash)
		return err
	})
	if err != nil {
		return inv, fmt.Errorf("storage: redeem invite: %w", err)
	}
	return inv, nil
}

// RevokeInvites withdraws every open invite of a session and says how
// many there were.
func (db *DB) RevokeInvites(ctx context.Context, sessionID string, now time.Time) (int, error) {
	var n int64
	err := db.inBatch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE invites SET revoked = 1
			WHERE session_id = ? AND revoked = 0 AND uses_left > 0 AND expires_at > ?`, sessionID, now.UnixMilli())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("storage: revoke invites of %s: %w", sessionID, err)
	}
	return int(n), nil
}
