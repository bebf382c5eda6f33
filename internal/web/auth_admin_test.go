package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dataloader/dataloader/internal/auth"
)

func TestAdminCreatesUsersChangesRolesAndDisablesThem(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	pw := e.user("root", auth.RoleAdmin)
	b := e.browser(t)
	b.mustSignIn("root", pw)
	tok := b.csrf()

	evil := `<script>alert("x")</script>`
	r := b.post("/admin/users", url.Values{"_csrf": {tok}, "name": {evil}, "password": {"evil-password"}, "role": {"operator"}})
	wantRedirect(t, r, "/admin/users")
	page := b.get("/admin/users")
	if strings.Contains(string(page.body), evil) || !strings.Contains(string(page.body), "&lt;script&gt;") {
		t.Errorf("users page: want the name escaped, got raw markup")
	}
	if !strings.Contains(string(page.body), "created.") {
		t.Errorf("users page: want the notice after creating a user")
	}
	for _, bad := range []url.Values{
		{"name": {evil}, "password": {"another-password"}, "role": {"viewer"}}, // taken
		{"name": {"carol"}, "password": {"short"}, "role": {"viewer"}},
		{"name": {"carol"}, "password": {"long-enough"}, "role": {"root"}},
		{"name": {""}, "password": {"long-enough"}, "role": {"viewer"}},
	} {
		bad.Set("_csrf", tok)
		if r := b.post("/admin/users", bad); r.status < 400 || r.status >= 500 || !strings.Contains(string(r.body), `data-testid="user-create-error"`) {
			t.Errorf("create %v: %d, want a 4xx with the form's error", bad, r.status)
		}
	}

	ctx := context.Background()
	u, _, err := e.st.UserCredentials(ctx, evil)
	if err != nil || u.Role != auth.RoleOperator {
		t.Fatalf("created user: %+v, %v", u, err)
	}
	id := strconv.FormatInt(u.ID, 10)
	wantRedirect(t, b.post("/admin/users/"+id+"/role", url.Values{"_csrf": {tok}, "role": {"viewer"}}), "/admin/users")
	wantRedirect(t, b.post("/admin/users/"+id+"/disable", url.Values{"_csrf": {tok}}), "/admin/users")
	if u, _, _ = e.st.UserCredentials(ctx, evil); u.Role != auth.RoleViewer || !u.Disabled {
		t.Errorf("after role change and disable: %+v, want a disabled viewer", u)
	}
	wantRedirect(t, b.post("/admin/users/"+id+"/enable", url.Values{"_csrf": {tok}}), "/admin/users")
	wantRedirect(t, b.post("/admin/users/"+id+"/password", url.Values{"_csrf": {tok}, "password": {"brand-new-password"}}), "/admin/users")
	e.browser(t).mustSignIn(evil, "brand-new-password")

	// The last enabled admin cannot lock everyone out.
	root, _, _ := e.st.UserCredentials(ctx, "root")
	rootID := strconv.FormatInt(root.ID, 10)
	for _, action := range []string{"disable", "role"} {
		r := b.post("/admin/users/"+rootID+"/"+action, url.Values{"_csrf": {tok}, "role": {"viewer"}})
		if r.status != http.StatusConflict || !strings.Contains(string(r.body), "last enabled admin") {
			t.Errorf("%s the last admin: %d, want 409 explaining why", action, r.status)
		}
	}
	if r := b.post("/admin/users/999999/disable", url.Values{"_csrf": {tok}}); r.status != http.StatusNotFound {
		t.Errorf("unknown user: %d, want 404", r.status)
	}
}

var tokenSecret = regexp.MustCompile(`data-testid="token-secret">(dl_[A-Za-z0-9_-]+)<`)

func TestAdminCreatesATokenSeenOnceAndRevokesIt(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	pw := e.user("root", auth.RoleAdmin)
	b := e.browser(t)
	b.mustSignIn("root", pw)
	tok := b.csrf()

	r := b.post("/admin/tokens", url.Values{"_csrf": {tok}, "name": {"etl"}, "role": {"operator"}})
	m := tokenSecret.FindSubmatch(r.body)
	if r.status != http.StatusCreated || m == nil {
		t.Fatalf("%s: want 201 showing the secret", r)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store on the page with the secret", cc)
	}
	secret := string(m[1])
	if list := b.get("/admin/tokens"); strings.Contains(string(list.body), secret) {
		t.Error("the tokens list shows the secret again, want it shown once")
	}
	api := e.browser(t)
	trigger := func() int {
		return api.send(http.MethodPost, "/api/v1/jobs/trigger", strings.NewReader(`{"queue":"q","task":"t","lock_key":"k"}`),
			"Content-Type", "application/json", "Authorization", "Bearer "+secret).status
	}
	if got := trigger(); got != http.StatusCreated {
		t.Errorf("trigger with the new operator token: %d, want 201", got)
	}
	if !strings.Contains(string(b.get("/admin/tokens").body), "user:root") {
		t.Error("tokens list: want the creator user:root")
	}

	var id int64
	if err := e.pool.QueryRow(context.Background(), `SELECT token_id FROM dl_api_tokens WHERE name = 'etl'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	wantRedirect(t, b.post("/admin/tokens/"+strconv.FormatInt(id, 10)+"/revoke", url.Values{"_csrf": {tok}}), "/admin/tokens")
	if got := trigger(); got != http.StatusUnauthorized {
		t.Errorf("trigger with the revoked token: %d, want 401", got)
	}
	if r := b.post("/admin/tokens/"+strconv.FormatInt(id, 10)+"/revoke", url.Values{"_csrf": {tok}}); r.status != http.StatusNotFound {
		t.Errorf("revoke twice: %d, want 404", r.status)
	}
	if r := b.post("/admin/tokens", url.Values{"_csrf": {tok}, "name": {""}, "role": {"viewer"}}); r.status != http.StatusBadRequest {
		t.Errorf("token without a name: %d, want 400", r.status)
	}
}
