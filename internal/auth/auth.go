// Package auth holds dataloader's access model: roles, the principal a
// request acts as (a signed-in user or an API token), and the checks both the
// dashboard and the API apply.
package auth

import (
	"fmt"
	"time"
)

// Role orders what a principal may do; each role includes the ones below it.
type Role int

// Roles: viewers read, operators also cancel, retry, pause and trigger,
// admins also manage users and tokens.
const (
	RoleNone Role = iota
	RoleViewer
	RoleOperator
	RoleAdmin
)

var roleNames = map[Role]string{RoleNone: "none", RoleViewer: "viewer", RoleOperator: "operator", RoleAdmin: "admin"}

func (r Role) String() string { return roleNames[r] }

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s && r != RoleNone {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("unknown role %q (viewer, operator or admin)", s)
}

// Principal is who a request acts as.
type Principal struct {
	Kind string // "user" or "token"
	Name string // user name or token name
	Role Role
}

// Can reports whether p holds at least role r.
func (p Principal) Can(r Role) bool { return p.Role >= r }

// Actor names p in the job journal, e.g. "user:alice" or "token:etl-prod".
func (p Principal) Actor() string {
	if p.Kind == "" {
		return "anonymous"
	}
	return p.Kind + ":" + p.Name
}

// User is a dashboard account.
type User struct {
	ID        int64
	Name      string
	Role      Role
	CreatedAt time.Time
	Disabled  bool
}

// Principal returns the principal a signed-in u acts as.
func (u User) Principal() Principal { return Principal{Kind: "user", Name: u.Name, Role: u.Role} }

// Token is an API bearer token. Its secret is shown once at creation and
// stored only as a SHA-256 hash.
type Token struct {
	ID         int64
	Name       string
	Role       Role
	CreatedBy  string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// Principal returns the principal a request bearing t acts as.
func (t Token) Principal() Principal { return Principal{Kind: "token", Name: t.Name, Role: t.Role} }
