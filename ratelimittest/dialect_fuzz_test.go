package ratelimittest

import (
	"net/http"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/stretchr/testify/require"
)

// FuzzIETFFields writes the IETF fields for any policy name and partition
// key and checks that they are valid RFC 9651 lists that carry the numbers.
func FuzzIETFFields(f *testing.F) {
	f.Add("burst", "alice", uint16(10), int64(3))
	f.Add(`we"ird\name`, "", uint16(1), int64(0))
	f.Add("ünïcode\x00\r\n", "key with spaces", uint16(65535), int64(1<<40))
	f.Fuzz(func(t *testing.T, name, key string, limit uint16, resetMs int64) {
		r, err := compile(Quota{Name: name, Limit: 1 + int(limit), Window: time.Minute})
		require.NoError(t, err)
		reset := max(0, resetMs%(1<<50)) * int64(time.Millisecond)
		v := view{status: []policyStatus{{rule: r, remaining: int64(limit), reset: reset}}, key: key, partitioned: true}
		h := http.Header{}
		v.write(h, IETF)
		for _, field := range []string{"RateLimit-Policy", "RateLimit"} {
			l, err := httpsfv.UnmarshalList(h.Values(field))
			require.NoError(t, err, "%s: %q", field, h.Get(field))
			require.Len(t, l, 1)
			item, ok := l[0].(httpsfv.Item)
			require.True(t, ok)
			_, ok = item.Value.(string)
			require.True(t, ok, "the name is an sf-string")
			pk, ok := item.Params.Get("pk")
			require.True(t, ok)
			require.Len(t, pk, 8)
		}
		l, _ := httpsfv.UnmarshalList(h.Values("RateLimit"))
		rv, _ := l[0].(httpsfv.Item).Params.Get("r")
		tv, _ := l[0].(httpsfv.Item).Params.Get("t")
		require.Equal(t, int64(limit), rv)
		require.Equal(t, ceilDiv(reset, second), tv)
	})
}
