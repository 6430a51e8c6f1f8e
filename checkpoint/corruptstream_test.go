package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/edl-nomad/edl/checkpoint"
)

// TestCorruptShardStreamStopsShort: a reader of a damaged shard (the API
// streaming a model to a client with curl) must not be handed the whole
// shard before the error. The error came with the last chunk, after every
// byte had been given out: the model download sent its full
// Content-Length of altered bytes, and a client that does not check
// X-Checkpoint-SHA256 kept a corrupt model without a sign of trouble.
// Now the chunk that completes a shard that does not verify is withheld,
// so the body ends short and the download fails.
func TestCorruptShardStreamStopsShort(t *testing.T) {
	t.Parallel()
	damages := []struct {
		name string
		edit func([]byte) []byte
	}{
		{"last byte flipped", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"middle byte flipped", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"bytes appended", func(b []byte) []byte { return append(b, "tail"...) }},
	}
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			for _, d := range damages {
				t.Run(d.name, func(t *testing.T) {
					ctx := context.Background()
					s := be.open(t)
					c := newCatalog(t, s, checkpoint.Config{})
					m := write(t, c, checkpoint.Meta{Step: 7}, stateAt(7, 3<<20+123))
					rewrite(t, s, shardKey(t, m, checkpoint.ShardParams), d.edit)
					rc, _, err := checkpoint.OpenModel(ctx, s, "job-1", 7)
					if err != nil {
						t.Fatal(err)
					}
					defer rc.Close()
					var out bytes.Buffer
					n, err := io.Copy(&out, rc)
					info, _ := m.Shard(checkpoint.ShardParams)
					if !errors.Is(err, checkpoint.ErrCorrupt) {
						t.Fatalf("copy of a damaged shard = %d bytes, %v; want ErrCorrupt", n, err)
					}
					if n >= info.Size {
						t.Errorf("copy handed out %d bytes of a %d-byte shard before failing; want it short", n, info.Size)
					}
				})
			}
		})
	}
}
