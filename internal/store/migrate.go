package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"github.com/dataloader/dataloader/migrations"
)

// MigrationsTable records which migrations ran. It is not goose's default
// name so that it never mixes with a user's own goose migrations.
const MigrationsTable = "dl_schema_migrations"

// Migrate applies every pending embedded migration to the database at dsn.
// Replicas starting together serialize on a session advisory lock.
func Migrate(ctx context.Context, dsn string, logger *slog.Logger) error {
	return withProvider(dsn, func(p *goose.Provider) error {
		results, err := p.Up(ctx)
		for _, r := range results {
			logger.Info("migration applied", "version", r.Source.Version, "path", r.Source.Path, "duration", r.Duration)
		}
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	})
}

// MigrationVersions reports the database's schema version and the newest
// version this binary knows.
func MigrationVersions(ctx context.Context, dsn string) (current, target int64, err error) {
	err = withProvider(dsn, func(p *goose.Provider) error {
		current, target, err = p.GetVersions(ctx)
		return err
	})
	return current, target, err
}

func withProvider(dsn string, fn func(*goose.Provider) error) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	st, err := database.NewStore(database.DialectPostgres, MigrationsTable)
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectCustom, db, migrations.FS,
		goose.WithStore(st), goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	return fn(p)
}
