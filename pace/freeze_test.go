package pace

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
)

// TestMemoryStoreFreezesIdleKeys: a key nobody read or wrote between two
// sweeps is kept encoded (a few hundred bytes instead of a State's two
// kilobytes and more), and comes back whole when it is used again.
func TestMemoryStoreFreezesIdleKeys(t *testing.T) {
	now := t0
	m := NewMemoryStore(func() time.Time { return now })
	req := Request{Route: "GET /"}
	for _, key := range []string{"idle", "busy"} {
		require.NoError(t, m.UpdateInPlaceAt(now, key, func(s *State) error {
			d := s.Reserve(now, req, nil)
			s.Complete(now, d.Lease, Answer{Obs: ratelimit.ParseHeaders(ietf(100, 60, 99, 60), 200, now)}, nil)
			return nil
		}))
	}
	want, err := m.Load(context.Background(), "idle")
	require.NoError(t, err)
	frozen := func(key string) bool {
		v, _ := m.keys.Load(key)
		e := v.(*memEntry)
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.frozen != nil
	}
	m.Sweep() // both were used since the store began
	require.False(t, frozen("idle"))
	require.NoError(t, m.UpdateInPlaceAt(now, "busy", func(*State) error { return nil }))
	m.Sweep()
	require.True(t, frozen("idle"), "idle since the last sweep")
	require.False(t, frozen("busy"), "used since the last sweep")

	got, err := m.Load(context.Background(), "idle")
	require.NoError(t, err)
	require.False(t, frozen("idle"), "thawed by its use")
	want.k.derived, got.k.derived = derived{}, derived{} // rebuilt from the leases when needed
	require.Empty(t, valueDiff(reflect.ValueOf(want.k), reflect.ValueOf(got.k), "keyState"), "whole again")
	require.Equal(t, want.Version, got.Version)
	require.True(t, want.Expires.Equal(got.Expires))
}

// TestMemoryStoreSweepsWithoutNewKeys: once a minute has passed since the
// last sweep, any update starts one (beside it, not in it), so that expired
// keys are forgotten and idle ones frozen whether or not new keys come.
func TestMemoryStoreSweepsWithoutNewKeys(t *testing.T) {
	now := t0
	m := NewMemoryStore(func() time.Time { return now })
	for _, key := range []string{"a", "b", "c"} {
		require.NoError(t, m.UpdateInPlaceAt(now, key, func(s *State) error {
			d := s.Reserve(now, Request{}, nil)
			s.Complete(now, d.Lease, Answer{Obs: ratelimit.Observation{Status: 200}}, nil)
			return nil
		}))
	}
	require.Equal(t, 3, m.Len())
	now = now.Add(DefaultIdleTTL + time.Minute) // b and c have expired
	require.NoError(t, m.UpdateInPlaceAt(now, "a", func(*State) error { return nil }))
	require.Eventually(t, func() bool { return m.Len() == 1 }, 5*time.Second, time.Millisecond)
}

// TestPackZerosRoundTrip: a frozen state's bytes come back as they were,
// whatever they hold: runs of zeros longer than a run's count (255), at
// either end, and none.
func TestPackZerosRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][]byte{nil, {0}, {1}, make([]byte, 255), make([]byte, 256), make([]byte, 600), {1, 0, 0, 2, 0}}
	for range 200 {
		b := make([]byte, rng.IntN(800))
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = byte(rng.IntN(256))
			}
		}
		cases = append(cases, b)
	}
	for _, b := range cases {
		p := packZeros(b)
		require.LessOrEqual(t, len(p), 2*len(b))
		got := unpackZeros(p)
		require.Equal(t, len(b), len(got))
		if len(b) > 0 {
			require.Equal(t, b, got)
		}
	}
}
