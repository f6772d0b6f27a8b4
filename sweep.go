package headway

import "sync/atomic"

// background runs a sweep of idle keys in its own goroutine, one at a time,
// so that the request that makes it due does not wait for it (a sweep of
// 200,000 keys took 143 ms of one request's time).
type background struct{ running atomic.Bool }

// run starts f unless a sweep is running already.
func (b *background) run(f func()) {
	if !b.running.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer b.running.Store(false)
		f()
	}()
}
