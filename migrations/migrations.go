// Package migrations embeds dataloader's numbered SQL migrations. They are
// applied by store.Migrate at start and by the `migrate` subcommand, and sqlc
// reads the schema from them.
package migrations

import "embed"

// FS holds the migration files, named NNNNN_description.sql in goose format.
//
//go:embed *.sql
var FS embed.FS
