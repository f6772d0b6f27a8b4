// Package redisstore keeps headway's pacing state in Redis, so that several
// processes that call one API with one quota (a worker pool, the pods of a
// deployment sharing an API key) pace as one client: each sees what the
// others have reserved, and any one's reading of the server's headers
// corrects them all.
//
//	client := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	store := redisstore.New(client)
//	httpClient := headway.New(headway.WithStore(store))
//
// # The model
//
// Store implements pace.Store, the pacing layer's seam: it loads a key's
// pace.State and replaces it atomically, and nothing more. The pacing
// decisions run in each process, in Go, in package pace; Redis only orders
// the replacements. Each pacing key (a host, by default) is one Redis
// string:
//
//	headway:pace:{9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
//	  = "42:1767225600123:1767225660123456789:\xb1..."    PX until the state's Expires
//
// The Redis key is a prefix (WithPrefix, default "headway:pace:") and the
// hex SHA-256 of the pacing key, never the key itself: a key may be an API
// key, or a URL with a token in it, and neither belongs in Redis or in its
// logs. The hash is a Redis Cluster hash tag ({...}), so everything about one
// pacing key lives in one slot. The value is the state's version, when it
// was written (Unix milliseconds), and its Expires (Unix nanoseconds), in
// decimal as redis-cli GET shows them, then the state itself in pace's
// compact binary form (pace.State.MarshalBinary: a format byte, then
// varints; a state of a few policies takes a few hundred bytes to a few
// kilobytes), which holds no route or path, only their hashes. A value
// this version cannot read (another format, the JSON of earlier versions,
// garbage) is taken as its version with a fresh state, which the next
// update replaces: the key starts afresh, and learns again.
//
// Load is one GET. CompareAndSwap is one Lua script: it reads the version
// in front and, only if it is the one the caller loaded, SETs the new state
// with the next version and a PX time to live that ends at the state's
// Expires (at least a millisecond), so that idle keys disappear by
// themselves. Within a process, the updates of one key wait for one another
// (Store implements pace.InPlace), so that a process's goroutines do not
// race each other through Redis; between processes a lost race is retried
// on the newer state.
//
// # When Redis is slow or down
//
// Every Redis call is bounded by a short timeout (WithTimeout, default
// 50ms), whether or not the go-redis client applies context deadlines to its
// connections (ContextTimeoutEnabled is recommended, so that an abandoned
// call frees its connection at once). The first call that fails or times
// out opens a small circuit:
//
//   - By default the store fails open: it keeps pacing in this process
//     only, in a fresh pace.MemoryStore (WithFallback to choose another), so
//     requests still go out, paced against what the server's headers say to
//     this process. Nothing is lost but the sharing.
//   - WithFailClosed makes it fail instead, with an *UnavailableError
//     (errors.Is(err, ErrUnavailable)), which headway returns for the
//     request, wrapped.
//
// Either way, while the circuit is open calls do not wait on Redis: at most
// once per retry interval (WithRetryInterval, default one second) a PING
// asks whether Redis is back, so a dead Redis costs one timeout when it
// dies, not one per request. Failing open, the PING goes in the background
// and the call goes on locally; failing closed, the call that finds the
// interval passed makes it, within the timeout, and goes on with Redis if it
// answers. When Redis answers, the store shares again: the next state
// loaded comes from Redis. Each switch is reported to WithOnSwitch's
// function and to WithLogger's logger (a nil logger is silent), and Mode
// says where the state is kept now.
//
// The state kept locally during an outage is dropped when Redis returns.
// If Redis kept its data (a pause, a partition, a failover, rather than a
// restart), the shared states written before the outage hold reservations
// whose answers went to the local state, or nowhere; they would count as in
// flight until they expire (pace.Config.LeaseTTL, a minute by default). So
// when Redis answers again, before sharing, the store deletes the states of
// the keys it used during the outage that nobody has written since it
// began: the first process back starts such a key afresh (one request goes
// first, and its answer teaches the rest), and the others find its state.
//
// # Clocks
//
// States hold instants (resets, pauses, reservations) that every process
// compares with its own clock, so the processes' clocks should agree to
// within a few milliseconds, as NTP keeps them. The time to live of a key is
// computed from the writer's clock and counted by Redis's.
package redisstore
