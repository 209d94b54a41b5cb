// Package collaboration decides who may do what in a shared session. A
// session can have several users, from several channels; each has a role.
package collaboration

import "fmt"

// Role is a user's standing in one session.
type Role string

const (
	// Owner created the session; it may write, approve tools and grant roles.
	Owner Role = "owner"
	// Approver may write and answer tool-approval requests.
	Approver Role = "approver"
	// Member may write but not approve.
	Member Role = "member"
	// Viewer only sees the stream.
	Viewer Role = "viewer"
)

// ParseRole accepts the four role names.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case Owner, Approver, Member, Viewer:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want owner, approver, member or viewer)", s)
}

// CanWrite reports whether the role may send messages and commands.
func (r Role) CanWrite() bool { return r == Owner || r == Approver || r == Member }

// CanApprove reports whether the role may answer confirmation requests.
func (r Role) CanApprove() bool { return r == Owner || r == Approver }

// CanGrant reports whether the role may change other users' roles.
func (r Role) CanGrant() bool { return r == Owner }
