package pgtest

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkCreateDatabase measures copying the migrated template with each
// strategy, plus the drop.
func BenchmarkCreateDatabase(b *testing.B) {
	s := get(b)
	tpl, err := s.template()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, strategy := range []string{"FILE_COPY", "WAL_LOG"} {
		b.Run(strategy, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("%sbench_%d", s.prefix, dbSeq.Add(1))
				if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+tpl+" STRATEGY "+strategy); err != nil {
					b.Fatal(err)
				}
				if _, err := s.admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
