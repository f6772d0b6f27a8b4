package redisstore_test

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/redisstore"
)

// Every process of a fleet that calls one API with one quota builds its
// client this way: the same Redis, the same prefix. Together they pace as
// one client; if Redis fails, each goes on pacing alone until it returns.
func Example() {
	rdb := redis.NewClient(&redis.Options{
		Addr: "localhost:6379",
		// Let the store's timeout free a connection it gives up on.
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()

	store := redisstore.New(rdb,
		redisstore.WithTimeout(50*time.Millisecond),
		redisstore.WithOnSwitch(func(e redisstore.Event) {
			log.Print(e) // e.g. "redisstore: shared -> local: redis load: no answer within 50ms"
		}),
		redisstore.WithLogger(slog.Default()),
	)
	client := headway.New(headway.WithStore(store))

	resp, err := client.Get("https://api.example.com/items")
	if err != nil {
		log.Print(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status)
}

// Failing closed, a request that cannot reach the shared state is not sent:
// it fails with the store's error, wrapped.
func ExampleWithFailClosed() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	client := &http.Client{Transport: headway.NewTransport(nil,
		headway.WithStore(redisstore.New(rdb, redisstore.WithFailClosed())))}

	resp, err := client.Get("https://api.example.com/items")
	switch {
	case errors.Is(err, redisstore.ErrUnavailable):
		log.Printf("not sent, the shared pacing state is unavailable: %v", err)
	case err != nil:
		log.Print(err)
	default:
		resp.Body.Close()
	}
}
