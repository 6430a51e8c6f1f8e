package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
)

// clock is a settable time source for retention tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newCatalog(t *testing.T, s checkpoint.Store, cfg checkpoint.Config) *checkpoint.Catalog {
	t.Helper()
	if cfg.Job == "" {
		cfg.Job = "job-1"
	}
	cfg.Log = quietLog()
	c, err := checkpoint.NewCatalog(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// state is what a test checkpoints: the shards' contents.
type state map[string][]byte

func stateAt(step int64, paramBytes int) state {
	return state{
		checkpoint.ShardParams:    randomBytes(paramBytes, uint64(step)),
		checkpoint.ShardOptimizer: randomBytes(paramBytes/2, uint64(step)+1000),
		checkpoint.ShardData:      []byte(fmt.Sprintf(`{"partition":3,"offset":%d}`, step*10)),
	}
}

func write(t *testing.T, c *checkpoint.Catalog, meta checkpoint.Meta, st state) *checkpoint.Manifest {
	t.Helper()
	var shards []checkpoint.ShardSource
	for _, name := range []string{checkpoint.ShardParams, checkpoint.ShardOptimizer, checkpoint.ShardData} {
		// Alternate in-memory and streamed bodies: both hashing paths.
		var body io.Reader = bytes.NewReader(st[name])
		size := int64(len(st[name]))
		if name == checkpoint.ShardOptimizer {
			body, size = plainReader{body}, -1
		}
		shards = append(shards, checkpoint.ShardSource{Name: name, Size: size, Body: body})
	}
	m, err := c.Write(context.Background(), meta, shards)
	if err != nil {
		t.Fatalf("write step %d: %v", meta.Step, err)
	}
	return m
}

// loadAll is a LoadFunc that reads every shard into got, built aside.
func loadAll(got *state) checkpoint.LoadFunc {
	return func(ctx context.Context, cp *checkpoint.Checkpoint) error {
		st := state{}
		for _, s := range cp.Manifest.Shards {
			rc, err := cp.Open(ctx, s.Name)
			if err != nil {
				return err
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return err
			}
			st[s.Name] = b
		}
		*got = st
		return nil
	}
}

func TestCatalogWriteRestoreList(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			s := be.open(t)
			clk := &clock{now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
			c := newCatalog(t, s, checkpoint.Config{Keep: 10, Now: clk.Now})
			ctx := context.Background()

			if _, err := c.Restore(ctx, loadAll(new(state)), nil); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
				t.Fatalf("restore of an empty job: %v, want ErrNoCheckpoint", err)
			}
			want := map[int64]state{}
			for i, step := range []int64{100, 200, 300} {
				want[step] = stateAt(step, 2<<20+i)
				clk.Add(time.Minute)
				m := write(t, c, checkpoint.Meta{Step: step, Epoch: i, Generation: int64(i + 1), WorldSize: 2,
					Labels: map[string]string{"loss": "0.5"}}, want[step])
				if m.CreatedAt != clk.Now() || m.Job != "job-1" || m.FormatVersion != checkpoint.FormatVersion || len(m.Shards) != 3 {
					t.Fatalf("manifest = %+v", m)
				}
				if m.Size() != int64(len(want[step][checkpoint.ShardParams])+len(want[step][checkpoint.ShardOptimizer])+len(want[step][checkpoint.ShardData])) {
					t.Fatalf("manifest size %d does not add up", m.Size())
				}
			}

			var got state
			m, err := c.Restore(ctx, loadAll(&got), func(sk checkpoint.Skip) { t.Errorf("unexpected skip %+v", sk) })
			if err != nil {
				t.Fatal(err)
			}
			if m.Step != 300 || m.Epoch != 2 || m.Generation != 3 || m.WorldSize != 2 || m.Labels["loss"] != "0.5" {
				t.Fatalf("restored manifest %+v, want step 300 epoch 2 generation 3 world 2", m.Meta)
			}
			for name, b := range want[300] {
				if !bytes.Equal(got[name], b) {
					t.Errorf("shard %s: restored %d bytes that differ from the %d written", name, len(got[name]), len(b))
				}
			}

			list, err := c.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var steps []int64
			for _, m := range list {
				steps = append(steps, m.Step)
			}
			if fmt.Sprint(steps) != "[100 200 300]" {
				t.Errorf("List steps = %v, want [100 200 300]", steps)
			}

			// The model download streams the params shard, verified.
			rc, mm, err := c.OpenShard(ctx, 200, checkpoint.ShardParams)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(b, want[200][checkpoint.ShardParams]) || mm.Step != 200 {
				t.Errorf("OpenShard(200, params): %d bytes, err %v, step %d", len(b), err, mm.Step)
			}
			// The API's package-level readers see the same.
			all, err := checkpoint.List(ctx, s, "job-1")
			if err != nil || len(all) != 3 || all[2].Step != 300 {
				t.Errorf("checkpoint.List = %d manifests, %v; want 3 ending at 300", len(all), err)
			}
			rc, _, err = checkpoint.OpenModel(ctx, s, "job-1", 300)
			if err != nil {
				t.Fatal(err)
			}
			b, err = io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(b, want[300][checkpoint.ShardParams]) {
				t.Errorf("OpenModel(300): %d bytes, err %v", len(b), err)
			}
			if _, _, err := c.OpenShard(ctx, 250, checkpoint.ShardParams); !errors.Is(err, checkpoint.ErrNotFound) {
				t.Errorf("OpenShard of a missing step: %v, want ErrNotFound", err)
			}
		})
	}
}

// damage is one way a checkpoint breaks in storage.
type damage struct {
	name string
	do   func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest)
}

func shardKey(t *testing.T, m *checkpoint.Manifest, name string) string {
	t.Helper()
	info, ok := m.Shard(name)
	if !ok {
		t.Fatalf("no shard %s", name)
	}
	return info.Key
}

func rewrite(t *testing.T, s checkpoint.Store, key string, edit func([]byte) []byte) {
	t.Helper()
	b := edit(getAll(t, s, key))
	if err := s.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

var damages = []damage{
	{"params shard deleted", func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest) {
		if err := s.Delete(context.Background(), shardKey(t, m, checkpoint.ShardParams)); err != nil {
			t.Fatal(err)
		}
	}},
	{"one byte flipped in params", func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest) {
		rewrite(t, s, shardKey(t, m, checkpoint.ShardParams), func(b []byte) []byte { b[len(b)/2] ^= 0x01; return b })
	}},
	{"one byte flipped in the data shard the loader skips", func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest) {
		rewrite(t, s, shardKey(t, m, checkpoint.ShardData), func(b []byte) []byte { b[0] ^= 0x80; return b })
	}},
	{"optimizer truncated", func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest) {
		rewrite(t, s, shardKey(t, m, checkpoint.ShardOptimizer), func(b []byte) []byte { return b[:len(b)-1] })
	}},
	{"manifest garbled", func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest) {
		key := fmt.Sprintf("%s/manifests/%020d.json", m.Job, m.Step)
		rewrite(t, s, key, func(b []byte) []byte { return b[:len(b)/2] })
	}},
}

func TestRestoreSkipsDamagedCheckpoints(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			for _, d := range damages {
				t.Run(d.name, func(t *testing.T) {
					s := be.open(t)
					c := newCatalog(t, s, checkpoint.Config{Keep: 10})
					older := stateAt(10, 1<<20)
					write(t, c, checkpoint.Meta{Step: 10, Epoch: 0}, older)
					newest := write(t, c, checkpoint.Meta{Step: 20, Epoch: 1}, stateAt(20, 1<<20))
					d.do(t, s, newest)

					var skips []checkpoint.Skip
					var got state
					// This loader reads params and optimizer but not the data
					// shard, so Restore must verify that one itself.
					load := func(ctx context.Context, cp *checkpoint.Checkpoint) error {
						st := state{}
						for _, name := range []string{checkpoint.ShardParams, checkpoint.ShardOptimizer} {
							rc, err := cp.Open(ctx, name)
							if err != nil {
								return err
							}
							b, err := io.ReadAll(rc)
							rc.Close()
							if err != nil {
								return err
							}
							st[name] = b
						}
						got = st
						return nil
					}
					m, err := c.Restore(context.Background(), load, func(sk checkpoint.Skip) { skips = append(skips, sk) })
					if err != nil {
						t.Fatalf("restore: %v", err)
					}
					if m.Step != 10 {
						t.Errorf("restored step %d, want the previous checkpoint, 10", m.Step)
					}
					if !bytes.Equal(got[checkpoint.ShardParams], older[checkpoint.ShardParams]) {
						t.Errorf("restored params are not those of step 10")
					}
					if len(skips) != 1 || skips[0].Step != 20 || !errors.Is(skips[0].Reason, checkpoint.ErrCorrupt) {
						t.Errorf("skips = %+v, want one for step 20 wrapping ErrCorrupt", skips)
					}
				})
			}
		})
	}
}

func TestRestoreStopsOnLoaderErrorAndStoreError(t *testing.T) {
	s := backends()[0].open(t)
	c := newCatalog(t, s, checkpoint.Config{})
	write(t, c, checkpoint.Meta{Step: 1}, stateAt(1, 1000))
	write(t, c, checkpoint.Meta{Step: 2}, stateAt(2, 1000))
	calls := 0
	loaderErr := errors.New("model shape mismatch")
	_, err := c.Restore(context.Background(), func(ctx context.Context, cp *checkpoint.Checkpoint) error {
		calls++
		return loaderErr
	}, func(sk checkpoint.Skip) { t.Errorf("skip %+v on a loader error", sk) })
	if !errors.Is(err, loaderErr) || calls != 1 {
		t.Errorf("Restore = %v after %d loads, want the loader's error after 1 (no silent roll-back)", err, calls)
	}

	down := &flakyStore{Store: s}
	down.failGets(true)
	c2 := newCatalog(t, down, checkpoint.Config{})
	_, err = c2.Restore(context.Background(), loadAll(new(state)), func(sk checkpoint.Skip) { t.Errorf("skip %+v on a store error", sk) })
	if err == nil || errors.Is(err, checkpoint.ErrNoCheckpoint) || errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("Restore with the store failing = %v, want the store's error", err)
	}
}

func TestReadFloat32sVerifies(t *testing.T) {
	s := backends()[0].open(t)
	c := newCatalog(t, s, checkpoint.Config{})
	params := []float32{1.5, -2.25, 3e-7, 0}
	buf := make([]byte, 16)
	checkpoint.PutFloat32s(buf, params)
	if want := []byte{0, 0, 0xc0, 0x3f}; !bytes.Equal(buf[:4], want) {
		t.Fatalf("1.5 encodes as % x, want little-endian % x", buf[:4], want)
	}
	m, err := c.Write(context.Background(), checkpoint.Meta{Step: 5}, []checkpoint.ShardSource{{Name: checkpoint.ShardParams, Size: 16, Body: bytes.NewReader(buf)}})
	if err != nil {
		t.Fatal(err)
	}
	read := func() ([]float32, error) {
		got := make([]float32, 4)
		_, err := c.Restore(context.Background(), func(ctx context.Context, cp *checkpoint.Checkpoint) error {
			rc, err := cp.Open(ctx, checkpoint.ShardParams)
			if err != nil {
				return err
			}
			defer rc.Close()
			return checkpoint.ReadFloat32s(rc, got)
		}, nil)
		return got, err
	}
	got, err := read()
	if err != nil || fmt.Sprint(got) != fmt.Sprint(params) {
		t.Fatalf("ReadFloat32s = %v, %v; want %v", got, err, params)
	}
	rewrite(t, s, m.Shards[0].Key, func(b []byte) []byte { b[15] ^= 1; return b })
	if _, err := read(); !errors.Is(err, checkpoint.ErrNoCheckpoint) {
		t.Fatalf("after a flipped byte restore = %v, want ErrNoCheckpoint", err)
	}
}

func TestCatalogRejectsBadInput(t *testing.T) {
	s := backends()[0].open(t)
	for _, job := range []string{"", "a/b", "..", strings.Repeat("x", 200)} {
		if _, err := checkpoint.NewCatalog(s, checkpoint.Config{Job: job}); err == nil || !strings.Contains(err.Error(), "Job") {
			t.Errorf("NewCatalog(job %q) = %v, want an error naming Job", job, err)
		}
	}
	if _, err := checkpoint.NewCatalog(s, checkpoint.Config{Job: "j", Keep: -1}); err == nil || !strings.Contains(err.Error(), "Keep") {
		t.Errorf("Keep -1: %v, want an error naming Keep", err)
	}
	c := newCatalog(t, s, checkpoint.Config{})
	cases := [][]checkpoint.ShardSource{
		nil,
		{{Name: "a/b", Size: 1, Body: strings.NewReader("x")}},
		{{Name: "p", Size: 1, Body: strings.NewReader("x")}, {Name: "p", Size: 1, Body: strings.NewReader("y")}},
		{{Name: "p", Size: 50, Body: strings.NewReader("short")}},
	}
	for i, shards := range cases {
		if _, err := c.Write(context.Background(), checkpoint.Meta{Step: 1}, shards); err == nil {
			t.Errorf("case %d: Write accepted bad shards", i)
		}
	}
	if list, _ := c.List(context.Background()); len(list) != 0 {
		t.Errorf("failed writes left checkpoints: %v", list)
	}
}
