package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-gw/switchboard"
)

// CreateInvite stores an invitation (its code only as a hash).
func (db *DB) CreateInvite(ctx context.Context, inv switchboard.Invite) error {
	_, err := db.pool.Exec(ctx, `INSERT INTO invites (code_hash, session_id, role, uses_left, expires_at, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, inv.CodeHash, inv.SessionID, inv.Role, inv.UsesLeft,
		inv.ExpiresAt.UnixMilli(), inv.CreatedBy, inv.CreatedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("postgres: create invite for %s: %w", inv.SessionID, err)
	}
	return nil
}

const inviteColumns = `code_hash, session_id, role, uses_left, expires_at, created_by, created_at, revoked`

func scanInvite(row pgx.Row) (switchboard.Invite, error) {
	var (
		inv              switchboard.Invite
		expires, created int64
	)
	err := row.Scan(&inv.CodeHash, &inv.SessionID, &inv.Role, &inv.UsesLeft, &expires, &inv.CreatedBy, &created, &inv.Revoked)
	inv.ExpiresAt, inv.CreatedAt = fromMillis(expires), fromMillis(created)
	return inv, err
}

// Invite reads the invite with codeHash without spending it
// (ErrNotFound when there is none).
func (db *DB) Invite(ctx context.Context, codeHash string) (switchboard.Invite, error) {
	inv, err := scanInvite(db.pool.QueryRow(ctx, `SELECT `+inviteColumns+` FROM invites WHERE code_hash = $1`, codeHash))
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return switchboard.Invite{}, fmt.Errorf("postgres: invite: %w", err)
	}
	return inv, nil
}

// RedeemInvite spends one use of the invite with codeHash, in one
// transaction: an unknown, expired, used-up or withdrawn code is refused
// (switchboard.ErrInvite…) and changes nothing. The row is locked while it
// is read, so two replicas redeeming the last use at once cannot both
// have it.
func (db *DB) RedeemInvite(ctx context.Context, codeHash string, now time.Time) (switchboard.Invite, error) {
	var inv switchboard.Invite
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		var err error
		inv, err = scanInvite(tx.QueryRow(ctx, `SELECT `+inviteColumns+` FROM invites WHERE code_hash = $1 FOR UPDATE`, codeHash))
		if errors.Is(err, pgx.ErrNoRows) {
			return switchboard.ErrInviteUnknown
		}
		if err != nil {
			return err
		}
		if err := inv.Redeemable(now); err != nil {
			return err
		}
		inv.UsesLeft--
		_, err = tx.Exec(ctx, `UPDATE invites SET uses_left = uses_left - 1 WHERE code_hash = $1`, codeHash)
		return err
	})
	if err != nil {
		return inv, fmt.Errorf("postgres: redeem invite: %w", err)
	}
	return inv, nil
}

// RevokeInvites withdraws every open invite of a session and says how
// many there were.
func (db *DB) RevokeInvites(ctx context.Context, sessionID string, now time.Time) (int, error) {
	tag, err := db.pool.Exec(ctx, `UPDATE invites SET revoked = true
		WHERE session_id = $1 AND NOT revoked AND uses_left > 0 AND expires_at > $2`, sessionID, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("postgres: revoke invites of %s: %w", sessionID, err)
	}
	return int(tag.RowsAffected()), nil
}
