package websocket

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-gw/switchboard/collaboration"
)

// Auth modes.
const (
	AuthNone  = "none"
	AuthToken = "token"
	AuthJWT   = "jwt"
)

// Auth says who may connect.
type Auth struct {
	// Mode is none (the hello's user is taken at its word: for loopback and
	// development), token (static tokens) or jwt (user tokens signed by the
	// site's backend with JWTSecret, HS256).
	Mode      string
	Tokens    []StaticToken
	JWTSecret []byte
}

// StaticToken is an accepted token and the user it stands for.
type StaticToken struct {
	Token  string
	UserID string
	Name   string
	Role   string // default member
}

// Claims are what a site's backend puts in a user token.
//
//	{"sub": "u-42", "name": "Ann", "role": "approver", "session": "s_…", "exp": 1767225600}
//
// sub and exp are required. role defaults to member. session, when set,
// limits the token to that one session (and lets its holder join it).
type Claims struct {
	Name    string `json:"name,omitempty"`
	Role    string `json:"role,omitempty"`
	Session string `json:"session,omitempty"`
	jwt.RegisteredClaims
}

// identity is an authenticated user.
type identity struct {
	userID, name string
	role         collaboration.Role // granted on attach; "" = keep or join role
	session      string             // the only session the token opens
	verified     bool               // the gateway vouches for userID
}

var errUnauthorized = errors.New("unauthorized")

var roleNames = []string{string(collaboration.Owner), string(collaboration.Approver), string(collaboration.Member), string(collaboration.Viewer)}

// authenticate checks a hello's token; userID and name are what the hello
// claims, used only in mode none.
func (a Auth) authenticate(token, userID, name string, now time.Time) (identity, error) {
	switch a.Mode {
	case AuthNone, "":
		return identity{userID: userID, name: name}, nil
	case AuthToken:
		if token == "" {
			return identity{}, fmt.Errorf("%w: this gateway needs a token in hello", errUnauthorized)
		}
		for _, t := range a.Tokens {
			if subtle.ConstantTimeCompare([]byte(token), []byte(t.Token)) == 1 {
				return identity{userID: t.UserID, name: t.Name, role: collaboration.Role(t.Role), verified: true}, nil
			}
		}
		return identity{}, fmt.Errorf("%w: unknown token", errUnauthorized)
	case AuthJWT:
		if token == "" {
			return identity{}, fmt.Errorf("%w: this gateway needs a signed user token in hello", errUnauthorized)
		}
		var c Claims
		_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return a.JWTSecret, nil },
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithExpirationRequired(),
			jwt.WithTimeFunc(func() time.Time { return now }),
			jwt.WithLeeway(30*time.Second),
		)
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			return identity{}, fmt.Errorf("%w: token expired; get a new one from the site", errUnauthorized)
		case err != nil:
			return identity{}, fmt.Errorf("%w: invalid token: %v", errUnauthorized, err)
		case c.Subject == "":
			return identity{}, fmt.Errorf("%w: token has no sub (user id)", errUnauthorized)
		case c.Role != "" && !slices.Contains(roleNames, c.Role):
			return identity{}, fmt.Errorf("%w: token role %q is not one of %v", errUnauthorized, c.Role, roleNames)
		}
		return identity{userID: c.Subject, name: c.Name, role: collaboration.Role(c.Role), session: c.Session, verified: true}, nil
	}
	return identity{}, fmt.Errorf("%w: auth mode %q", errUnauthorized, a.Mode)
}
