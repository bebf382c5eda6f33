// Package views holds the dashboard's templ components and the view models
// they render. Views do no I/O and hold no business rules: handlers build a
// view model and pass it in.
package views

import "github.com/a-h/templ"

// Page is what the shared layout needs about the request: the title, the
// active navigation entry, who is signed in, and the CSRF token that forms
// and htmx requests send back.
type Page struct {
	Title string
	Nav   string // active navigation key, e.g. "queues", "jobs"
	User  User
	CSRF  string
	Flash string // one-off notice shown at the top
	// Live is the URL of the page's server-sent event stream ("" for a
	// page without live regions).
	Live string
}

// mainAttrs connects the page's live regions to its event stream.
func (p Page) mainAttrs() templ.Attributes {
	if p.Live == "" {
		return templ.Attributes{}
	}
	return templ.Attributes{"sse-connect": p.Live, "data-live-stream": ""}
}

// User is the signed-in principal as the views need it.
type User struct {
	Name       string
	Role       string // viewer, operator or admin
	CanOperate bool   // cancel, retry, pause, trigger
	IsAdmin    bool   // users and tokens
}

// SignedIn reports whether a user is signed in.
func (u User) SignedIn() bool { return u.Name != "" }
