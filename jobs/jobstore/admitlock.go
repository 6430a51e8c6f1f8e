package jobstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// admitLockKey is held while one deadline job is judged and created.
func (s *Store) admitLockKey() string { return s.cfg.Prefix + "admit:lock" }

// AdmitLockTTL bounds how long a holder of the admission lock keeps it
// (one that dies holding it is outlived by that much at most).
const AdmitLockTTL = 15 * time.Second

var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// LockAdmission takes the store's admission lock (p admit:lock), waiting
// while another holder has it, until ctx ends: deadline jobs are judged and
// created one at a time, each with the ones admitted before it among the
// live jobs, across every API process of the store. The answer releases
// it (only if still held by this caller).
func (s *Store) LockAdmission(ctx context.Context) (unlock func(), err error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("admission lock: %w", err)
	}
	token := hex.EncodeToString(b[:])
	key := s.admitLockKey()
	wait := 2 * time.Millisecond
	for {
		ok, err := s.rdb.SetNX(ctx, key, token, AdmitLockTTL).Result()
		if err != nil {
			return nil, fmt.Errorf("admission lock: %w", err)
		}
		if ok {
			return func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				defer cancel()
				_ = unlockScript.Run(ctx, s.rdb, []string{key}, token).Err()
			}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("admission lock: waiting for another submission: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
