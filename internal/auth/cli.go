package auth

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"
)

// Directory is the user and token storage the `user` and `token`
// subcommands need; *store.Store implements it.
type Directory interface {
	Accounts
	Users(ctx context.Context) ([]User, error)
	CreateToken(ctx context.Context, name string, role Role, createdBy string) (Token, string, error)
	Tokens(ctx context.Context) ([]Token, error)
	RevokeToken(ctx context.Context, id int64) error
}

// CommandIO is the terminal of a subcommand.
type CommandIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Password, when set (from DL_ADMIN_PASSWORD), is used by `user add`
	// instead of reading stdin.
	Password string
}

// CommandUsage describes the user and token subcommands.
const CommandUsage = `usage:
  web user add NAME [--role viewer|operator|admin]   password from DL_ADMIN_PASSWORD, else stdin
  web user list
  web token add NAME [--role viewer|operator|admin]  prints the secret once
  web token list
  web token revoke ID
The role defaults to viewer.`

// ErrUsage is returned for a malformed command line.
var ErrUsage = errors.New(CommandUsage)

// Command runs `web user …` or `web token …` (args start with "user" or
// "token").
func Command(ctx context.Context, d Directory, args []string, cio CommandIO) error {
	if len(args) < 2 {
		return ErrUsage
	}
	pos, role, err := parseCommandArgs(args[2:])
	if err != nil {
		return err
	}
	switch args[0] + " " + args[1] {
	case "user add":
		if len(pos) != 1 {
			return ErrUsage
		}
		pw, err := readPassword(cio)
		if err != nil {
			return err
		}
		hash, err := HashPassword(pw)
		if err != nil {
			return err
		}
		if err := d.CreateUser(ctx, pos[0], hash, role); err != nil {
			return err
		}
		fmt.Fprintf(cio.Stdout, "user %s created with role %s\n", pos[0], role)
		return nil
	case "user list":
		if len(pos) != 0 {
			return ErrUsage
		}
		users, err := d.Users(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(cio.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tROLE\tSTATE\tCREATED")
		for _, u := range users {
			state := "active"
			if u.Disabled {
				state = "disabled"
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", u.ID, u.Name, u.Role, state, u.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"))
		}
		return w.Flush()
	case "token add":
		if len(pos) != 1 {
			return ErrUsage
		}
		t, secret, err := d.CreateToken(ctx, pos[0], role, "cli")
		if err != nil {
			return err
		}
		fmt.Fprintf(cio.Stderr, "token %s (id %d, role %s) created; its secret, shown only this once:\n", t.Name, t.ID, t.Role)
		fmt.Fprintln(cio.Stdout, secret)
		return nil
	case "token list":
		if len(pos) != 0 {
			return ErrUsage
		}
		tokens, err := d.Tokens(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(cio.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tROLE\tSTATE\tCREATED BY\tLAST USED")
		for _, t := range tokens {
			state, used := "active", "never"
			if t.RevokedAt != nil {
				state = "revoked"
			}
			if t.LastUsedAt != nil {
				used = t.LastUsedAt.UTC().Format("2006-01-02 15:04:05Z")
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, state, t.CreatedBy, used)
		}
		return w.Flush()
	case "token revoke":
		if len(pos) != 1 {
			return ErrUsage
		}
		id, err := strconv.ParseInt(pos[0], 10, 64)
		if err != nil {
			return fmt.Errorf("token id %q: must be a number (see web token list)", pos[0])
		}
		if err := d.RevokeToken(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(cio.Stdout, "token %d revoked\n", id)
		return nil
	}
	return ErrUsage
}

// parseCommandArgs splits positional arguments from --role (anywhere on
// the line, as "--role R", "--role=R", "-role R").
func parseCommandArgs(args []string) (pos []string, role Role, err error) {
	role = RoleViewer
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "role" {
			return nil, 0, fmt.Errorf("unknown flag %s\n%w", a, ErrUsage)
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, 0, fmt.Errorf("--role needs a value\n%w", ErrUsage)
			}
			i++
			val = args[i]
		}
		if role, err = ParseRole(val); err != nil {
			return nil, 0, err
		}
	}
	return pos, role, nil
}

// readPassword takes the new user's password from DL_ADMIN_PASSWORD, a
// terminal (asked twice, not echoed) or the first line of stdin.
func readPassword(cio CommandIO) (string, error) {
	pw := cio.Password
	if pw == "" {
		if f, ok := cio.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			fmt.Fprint(cio.Stderr, "Password: ")
			a, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(cio.Stderr)
			if err != nil {
				return "", fmt.Errorf("read password: %w", err)
			}
			fmt.Fprint(cio.Stderr, "Again: ")
			b, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(cio.Stderr)
			if err != nil {
				return "", fmt.Errorf("read password: %w", err)
			}
			if string(a) != string(b) {
				return "", errors.New("the passwords differ")
			}
			pw = string(a)
		} else {
			line, err := bufio.NewReader(cio.Stdin).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return "", fmt.Errorf("read password from stdin: %w", err)
			}
			pw = strings.TrimRight(line, "\r\n")
		}
	}
	if err := CheckNewPassword(pw); err != nil {
		return "", fmt.Errorf("%w (from DL_ADMIN_PASSWORD or stdin)", err)
	}
	return pw, nil
}
