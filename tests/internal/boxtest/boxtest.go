// Package boxtest holds helpers shared by the integration tests and the bench.
package boxtest

import (
	"context"
	"errors"

	"github.com/boxlite/boxlite"
)

// CreateStarted creates a box and starts it (Create returns a configured
// box), removing the box when its start fails so that a failed boot leaves
// nothing; the start's error is returned, joined with the removal's if that
// failed too.
func CreateStarted(ctx context.Context, rt *boxlite.Runtime, image string, opts ...boxlite.BoxOption) (*boxlite.Box, error) {
	b, err := rt.Create(ctx, image, opts...)
	if err != nil {
		return nil, err
	}
	if err := b.Start(ctx); err != nil {
		return nil, errors.Join(err, b.Remove(context.Background(), true))
	}
	return b, nil
}
